package secret

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRedactShapesAndValues(t *testing.T) {
	const tok = "hubtoken-5f0e2a9b7c"
	var r Redactor
	r.Add(tok, "zq", "")
	for _, tc := range []struct{ in, leak string }{
		{"Authorization: token " + tok, tok},
		{"authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.abcdefghijkl", "eyJhbGciOiJIUzI1NiJ9"},
		{"AUTHORIZATION:Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"},
		{"headers: map[Authorization:[token abcdefabcdef12] Accept:[*/*]]", "abcdefabcdef12"},
		{`{"Authorization": "token zzzzzzzzzzzzzz"}`, "zzzzzzzzzzzzzz"},
		{"Proxy-Authorization: Basic cHJveHk6c2VjcmV0", "cHJveHk6c2VjcmV0"},
		{"GET http://alice:hunter22@prom.example:9090/api", "hunter22"},
		{"dial https://u:p%40ss@host/", "p%40ss"},
		{"password=letmein&user=x", "letmein"},
		{"smtp_password: \"s3cr3t\"", "s3cr3t"},
		{"?access_token=abc123def456", "abc123def456"},
		{"X-Api-Key: 0123456789", "0123456789"},
		{"X-Auth-Token: deadbeefdeadbeef", "deadbeefdeadbeef"},
		{"echo " + tok + " in a body", tok},
		{"bearer    aaaaaaaaaaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaaaaaaaaaa"},
		{"the zq is zq", " zq"},
	} {
		got := r.String(tc.in)
		if strings.Contains(got, tc.leak) {
			t.Errorf("%q -> %q: leaks %q", tc.in, got, tc.leak)
		}
	}
	for _, keep := range []string{"connection refused", "JupyterHub answered 404: Not Found", "token expired", "job 42 is RUNNING"} {
		if got := String(keep); got != keep {
			t.Errorf("%q became %q", keep, got)
		}
	}
	base := errors.New("Authorization: token " + tok)
	if err := r.Error(base); strings.Contains(err.Error(), tok) || !errors.Is(err, base) {
		t.Errorf("Error: %v", err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want, err string
		word            bool
	}{
		{write("ok", "tok3n\n"), "tok3n", "", true},
		{write("crlf", "pass word\r\n"), "pass word", "", false},
		{write("spaces", "pass word\n"), "", "one token", true},
		{write("empty", "\n"), "", "one line", false},
		{write("two", "a\nb\n"), "", "one line", false},
		{write("big", strings.Repeat("x", MaxBytes+1)), "", "more than", false},
		{fifo, "", "not a regular file", true},
		{"/dev/zero", "", "not a regular file", false},
		{dir, "", "not a regular file", false},
		{filepath.Join(dir, "missing"), "", "no such file", false},
	} {
		var r Redactor
		read := ReadFile
		if tc.word {
			read = ReadWord
		}
		// A FIFO or a device must be refused, not read: a read would block
		// forever (a FIFO with no writer) or never end (/dev/zero). The
		// limit only tells a hang from a slow machine.
		var got string
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = read(tc.path, &r)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still reading after 30 s", tc.path)
		}
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: %q %v", tc.path, got, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %q %v, want error %q", tc.path, got, err, tc.err)
		case tc.err == "" && r.String("x "+got) != "x "+Mask:
			t.Errorf("%s: value not taught to the redactor", tc.path)
		}
	}
}

func TestOwnMessagesStayReadable(t *testing.T) {
	for _, msg := range []string{
		"JupyterHub token: secret file /etc/gpuwatch/hub-token: not a regular file (named pipe)",
		"smtp password_file: secret file /run/pw: want exactly one secret on one line",
		"--web.config.file /etc/web.yml: basic_auth_users: user admin: crypto/bcrypt: hashedSecret too short",
	} {
		if got := String(msg); got != msg {
			t.Errorf("%q became %q", msg, got)
		}
	}
}
