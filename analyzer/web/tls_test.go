package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// TestServedBehindWebConfig serves the Handler the way the analyzer does,
// through exporter-toolkit with a web config: TLS, and basic auth on every page.
func TestServedBehindWebConfig(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cert, key := write("cert.pem", string(certPEM)), write("key.pem", string(keyPEM))
	cfg := write("web.yml", fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  admin: %s\n", cert, key, hash))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := &http.Server{Handler: fixtureHandler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	flags := &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: new(bool), WebConfigFile: &cfg}
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(srv, flags, slog.New(slog.DiscardHandler)) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	do := func(scheme, user, pass string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/?team=vision", nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		var resp *http.Response
		var err error
		for i := 0; i < 50; i++ { // the listener may not be up yet
			if resp, err = client.Do(req); err == nil || !strings.Contains(err.Error(), "connection refused") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		return resp.StatusCode, readAll(t, resp.Body)
	}
	cases := []struct {
		name, scheme, user, pass string
		code                     int
	}{
		{"no credentials", "https", "", "", http.StatusUnauthorized},
		{"wrong password", "https", "admin", "nope", http.StatusUnauthorized},
		{"right password", "https", "admin", "s3cret", http.StatusOK},
		{"plain http", "http", "admin", "s3cret", http.StatusBadRequest},
	}
	for _, c := range cases {
		code, body := do(c.scheme, c.user, c.pass)
		if code != c.code {
			t.Errorf("%s: status %d, want %d (%.100s)", c.name, code, c.code, body)
		}
		if c.code == http.StatusOK && len(rows(body)) != 3 {
			t.Errorf("%s: %d finding rows, want vision's 3", c.name, len(rows(body)))
		}
	}
	select {
	case err := <-errc:
		t.Fatalf("server stopped: %v", err)
	default:
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte) {
	c := testtool.SelfSigned(t)
	return c.CertPEM, c.KeyPEM
}
