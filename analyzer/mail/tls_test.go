package mail

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// selfSigned makes a certificate for 127.0.0.1 and writes it as a CA file.
func selfSigned(t *testing.T) (tls.Certificate, string) {
	c := testtool.SelfSigned(t)
	return c.TLS, c.CertFile
}

func TestTLSModes(t *testing.T) {
	cert, ca := selfSigned(t)
	_, otherCA := selfSigned(t)
	cases := []struct {
		name      string
		server    string // starttls, tls or plain
		mode      string
		ca        string
		wantError string
	}{
		{name: "starttls", server: "starttls", mode: TLSStartTLS, ca: ca},
		{name: "implicit tls", server: "tls", mode: TLSImplicit, ca: ca},
		{name: "starttls is mandatory: no plaintext fallback", server: "plain", mode: TLSStartTLS, ca: ca, wantError: "STARTTLS"},
		{name: "unknown CA is refused", server: "starttls", mode: TLSStartTLS, ca: otherCA, wantError: "certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeServer{user: "gw", pass: "pw"}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := smtp.NewServer(f)
			srv.Domain = "localhost"
			srv.ReadTimeout, srv.WriteTimeout = 5*time.Second, 5*time.Second
			tlsCfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
			switch tc.server {
			case "starttls":
				srv.TLSConfig = tlsCfg
			case "tls":
				l = tls.NewListener(l, tlsCfg)
			}
			go srv.Serve(l) //nolint:errcheck // ends with Close
			t.Cleanup(func() { srv.Close() })
			pw := filepath.Join(t.TempDir(), "pw")
			if err := os.WriteFile(pw, []byte("pw"), 0o600); err != nil {
				t.Fatal(err)
			}
			zero := 0
			s, err := NewSMTP(Config{Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, TLS: tc.mode, CAFile: tc.ca,
				Auth: "plain", Username: "gw", PasswordFile: pw, From: "gw@example.org", Timeout: configfile.Duration(5 * time.Second), Retries: &zero}, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(context.Background(), testMessage())
			if tc.wantError == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(f.messages) != 1 {
					t.Fatalf("%d messages delivered", len(f.messages))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantError)
			}
			if len(f.messages) != 0 || len(f.authTried) != 0 {
				t.Fatalf("credentials or mail went over an unverified connection")
			}
		})
	}
}
