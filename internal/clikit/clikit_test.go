package clikit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"
)

func webFlags(file string) *web.FlagConfig {
	return &web.FlagConfig{WebConfigFile: &file}
}

// clearPassword is a password where a web config wants its bcrypt hash.
const clearPassword = "correct-horse-battery-staple"

func TestValidateWebConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		file string
		want string // "" for valid
	}{
		{"no file", "", ""},
		{"good", write("good.yml", "http_server_config:\n  http2: false\n"), ""},
		{"unknown key", write("typo.yml", "http_server_config:\n  http2: false\nbasic_auth_user:\n  a: b\n"), "typo.yml:3: basic_auth_user: unknown key"},
		{"second document", write("two.yml", "http_server_config:\n  http2: false\n---\nbasic_auth_users:\n  a: b\n"), "document"},
		{"missing", filepath.Join(dir, "absent.yml"), "absent.yml"},
		// A password written where its hash belongs: file:line, the user,
		// and how to make a hash, not bcrypt's "hashedSecret too short".
		{"password in clear", write("clear.yml", "http_server_config:\n  http2: false\nbasic_auth_users:\n  admin: "+clearPassword+"\n"),
			"clear.yml:4: basic_auth_users.admin: not a bcrypt hash: the value must be the hash of the password, never the password itself; make one with htpasswd -nBC 10 \"\" | cut -d: -f2"},
		{"tab in the indentation", write("tab.yml", "basic_auth_users:\n  admin: x\n\tops: y\n"), "tab.yml:3: found a tab character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateWebConfig(webFlags(tc.file))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid file refused: %v", err)
				}
				return
			}
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("got %v, want a *UsageError", err)
			}
			if !strings.Contains(err.Error(), "--web.config.file") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q should name the flag and %q", err, tc.want)
			}
			if strings.Contains(err.Error(), clearPassword) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q repeats the password or is not one line", err)
			}
		})
	}
	if err := ValidateWebConfig(nil); err != nil {
		t.Errorf("nil flags: %v", err)
	}
}

func TestLogFlags(t *testing.T) {
	app := kingpin.New("t", "")
	l := RegisterLogFlags(app)
	if _, err := app.Parse([]string{"--log.level=warn", "--log.format=json"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logger, err := l.loggerTo(&out)
	if err != nil {
		t.Fatal(err)
	}
	if logger.Enabled(context.Background(), slog.LevelInfo) || !logger.Enabled(context.Background(), slog.LevelWarn) {
		t.Error("--log.level=warn should drop info and keep warn")
	}
	// JSON, and redacted: the logger every command is built with masks a
	// credential a peer echoed, whichever call site logs it.
	logger.Warn("hub said Authorization: token abcdefabcdef0123", "detail", errors.New("post http://u:hunter22@hook/"))
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Errorf("--log.format=json wrote %q: %v", out.String(), err)
	}
	if s := out.String(); strings.Contains(s, "abcdefabcdef0123") || strings.Contains(s, "hunter22") {
		t.Errorf("the log holds a secret: %s", s)
	}
	if _, err := app.Parse([]string{"--log.level=loud"}); err == nil {
		t.Error("an unknown level was accepted")
	}
}
