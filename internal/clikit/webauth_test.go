package clikit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
)

func TestWebConfigAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("a password made for this test"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		auth       bool
	}{
		{"empty", "{}\n", false},
		{"http2 only", "http_server_config:\n  http2: true\n", false},
		{"tls without client certificates", "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n", false},
		{"client certificates optional", "tls_server_config:\n  client_auth_type: VerifyClientCertIfGiven\n", false},
		{"no users", "basic_auth_users: {}\n", false},
		{"basic auth", "basic_auth_users:\n  prometheus: " + string(hash) + "\n", true},
		{"client certificates required", "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".yml")
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := WebConfigAuth(p)
			if err != nil || got != tc.auth {
				t.Errorf("auth %v (%v), want %v", got, err, tc.auth)
			}
		})
	}
}

// TestOpenWithoutAuth: the analyzer's start-up warning names exactly the
// addresses other hosts reach, and only while no client must authenticate.
func TestOpenWithoutAuth(t *testing.T) {
	dir := t.TempDir()
	noAuth := filepath.Join(dir, "tls-only.yml")
	auth := filepath.Join(dir, "auth.yml")
	if err := os.WriteFile(noAuth, []byte("http_server_config:\n  http2: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth, []byte("basic_auth_users:\n  prometheus: $2y$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg   string
		addrs []string
		open  []string
	}{
		{"", []string{"127.0.0.1:9836"}, nil},
		{"", []string{"[::1]:9836", "localhost:9836", "127.0.0.53:1"}, nil},
		{"", []string{":9836"}, []string{":9836"}},
		{"", []string{"[::]:9836"}, []string{"[::]:9836"}},
		{"", []string{"0.0.0.0:9836"}, []string{"0.0.0.0:9836"}},
		{"", []string{"10.0.0.5:9836", "127.0.0.1:1"}, []string{"10.0.0.5:9836"}},
		{"", []string{"analyzer.example:9836"}, []string{"analyzer.example:9836"}},
		{"", []string{"vsock://:9836"}, []string{"vsock://:9836"}},
		{"", []string{"garbage"}, []string{"garbage"}},
		{noAuth, []string{":9836"}, []string{":9836"}},
		{auth, []string{":9836"}, nil},
	} {
		f := tc.cfg
		got, err := OpenWithoutAuth(&web.FlagConfig{WebConfigFile: &f}, tc.addrs)
		if err != nil || strings.Join(got, ",") != strings.Join(tc.open, ",") {
			t.Errorf("%s %v: open %v (%v), want %v", tc.cfg, tc.addrs, got, err, tc.open)
		}
	}
}
