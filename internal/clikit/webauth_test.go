package clikit

import (
	"os"
	"path/filepath"
	"testing"

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
