package report_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// certFiles writes a self-signed certificate for 127.0.0.1 (its own CA).
func certFiles(t *testing.T) (cert, key string) {
	c := testtool.SelfSigned(t)
	return c.CertFile, c.KeyFile
}

// TestSTARTTLSThroughMailpit: the default mode, STARTTLS with AUTH over the
// encrypted session, against a server that requires it, verifying the
// server with a private CA.
func TestSTARTTLSThroughMailpit(t *testing.T) {
	t.Parallel()
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
