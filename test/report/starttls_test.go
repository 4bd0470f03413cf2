package report_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// certFiles writes a self-signed certificate for 127.0.0.1 (its own CA).
func certFiles(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "mailpit test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestSTARTTLSThroughMailpit: the default mode, STARTTLS with AUTH over the
// encrypted session, against a server that requires it, verifying the
// server with a private CA.
func TestSTARTTLSThroughMailpit(t *testing.T) {
	cert, key := certFiles(t)
	mp := startMailpit(t, 0, "--smtp-auth-file", authFile(t), "--smtp-tls-cert", cert, "--smtp-tls-key", key, "--smtp-require-starttls")
	cfg := writeConfig(t, smtpOpts{port: mp.SMTPPort, password: smtpPassword,
		extra: "  ca_file: " + cert + "\n"})
	cfg.SMTP.TLS = "starttls"
	cfg.SMTP.Auth = "auto"
	db := filepath.Join(t.TempDir(), "state.db")
	want := fill(t, db)
	d := start(t, db, cfg)
	if err := d.job.Run(context.Background(), slot); err != nil {
		t.Fatal(err)
	}
	checkMessages(t, mp, want)
}
