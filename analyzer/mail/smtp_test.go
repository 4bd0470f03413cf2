package mail

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// fakeServer is an in-test SMTP server (github.com/emersion/go-smtp) whose
// behaviour each case scripts: refuse auth, reject a recipient, fail the
// first N deliveries with a 4xx.
type fakeServer struct {
	mu         sync.Mutex
	user, pass string
	refuseAuth bool
	echoAuth   bool // refuse with a reply that quotes the AUTH exchange, as some relays do
	rejectRcpt string
	failFirst  int
	authTried  []string
	messages   [][]byte
	rcpts      [][]string
}

type fakeSession struct {
	s     *fakeServer
	rcpts []string
}

func (f *fakeServer) NewSession(*smtp.Conn) (smtp.Session, error) { return &fakeSession{s: f}, nil }

func (s *fakeSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *fakeSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.s.mu.Lock()
		defer s.s.mu.Unlock()
		s.s.authTried = append(s.s.authTried, user)
		if s.s.echoAuth {
			echo := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "Authentication failed for AUTH PLAIN " + echo + " (" + pass + ")\x1b[2J"}
		}
		if s.s.refuseAuth || user != s.s.user || pass != s.s.pass {
			return smtp.ErrAuthFailed
		}
		return nil
	}), nil
}
func (s *fakeSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *fakeSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.s.rejectRcpt != "" && to == s.s.rejectRcpt {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	s.rcpts = append(s.rcpts, to)
	return nil
}
func (s *fakeSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	if s.s.failFirst > 0 {
		s.s.failFirst--
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
	}
	s.s.messages = append(s.s.messages, b)
	s.s.rcpts = append(s.s.rcpts, s.rcpts)
	return nil
}
func (s *fakeSession) Reset()        { s.rcpts = nil }
func (s *fakeSession) Logout() error { return nil }

func startFake(t *testing.T, f *fakeServer) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := smtp.NewServer(f)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	srv.ReadTimeout, srv.WriteTimeout = 5*time.Second, 5*time.Second
	go srv.Serve(l) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func testMessage() Message {
	return Message{
		To:      []string{"alice@example.org", "bob@example.org"},
		Subject: "GPU report\r\nBcc: evil@example.org",
		Text:    "plain text body 12.5 GPU-hours",
		HTML:    `<p>html body <img src="cid:chart.png"></p>`,
		Inline:  []Inline{{CID: "chart.png", ContentType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nfake")}},
	}
}

func TestSMTPSend(t *testing.T) {
	const secret = "s3cret-Pa55"
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	retries := func(n int) *int { return &n }
	cases := []struct {
		name          string
		srv           *fakeServer // nil: nothing listens
		cfg           func(c *Config)
		msg           func(m *Message)
		wantErr       bool
		wantPermanent bool
		wantAttempts  int
		wantSleeps    []time.Duration
		wantDelivered int
	}{
		{name: "password file, plain auth", srv: &fakeServer{user: "gw", pass: secret},
			cfg: func(c *Config) { c.PasswordFile = pwFile }, wantDelivered: 1},
		{name: "password env", srv: &fakeServer{user: "gw", pass: secret},
			cfg: func(c *Config) { c.PasswordEnv = "SMTP_PW" }, wantDelivered: 1},
		{name: "auth refused is permanent", srv: &fakeServer{user: "gw", pass: secret, refuseAuth: true},
			cfg: func(c *Config) { c.PasswordFile = pwFile }, wantErr: true, wantPermanent: true, wantAttempts: 1},
		{name: "server down is retried with backoff", cfg: func(c *Config) { c.Auth = "none"; c.Username = "" },
			wantErr: true, wantAttempts: 4, wantSleeps: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{name: "4xx then success", srv: &fakeServer{failFirst: 2},
			cfg: func(c *Config) { c.Auth = "none"; c.Username = "" }, wantSleeps: []time.Duration{time.Second, 2 * time.Second}, wantDelivered: 1},
		{name: "rejected recipient is permanent", srv: &fakeServer{rejectRcpt: "bob@example.org"},
			cfg: func(c *Config) { c.Auth = "none"; c.Username = "" }, wantErr: true, wantPermanent: true, wantAttempts: 1},
		{name: "malformed address never reaches the server", srv: &fakeServer{},
			cfg: func(c *Config) { c.Auth = "none"; c.Username = "" }, msg: func(m *Message) { m.To = []string{"not an address"} },
			wantErr: true, wantPermanent: true, wantAttempts: 1},
		{name: "no retries configured", cfg: func(c *Config) { c.Auth = "none"; c.Username = ""; c.Retries = retries(0) },
			wantErr: true, wantAttempts: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			port := testtool.FreePort(t)
			if tc.srv != nil {
				port = startFake(t, tc.srv)
			}
			cfg := Config{Host: "127.0.0.1", Port: port, TLS: TLSNone, Auth: "plain", Username: "gw",
				From: "gpuwatch <gpuwatch@example.org>", Timeout: 5 * time.Second, Backoff: time.Second}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			var sleeps []time.Duration
			var logs bytes.Buffer
			s, err := NewSMTP(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				WithSleep(func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }),
				WithGetenv(func(k string) string {
					if k == "SMTP_PW" {
						return secret
					}
					return ""
				}))
			if err != nil {
				t.Fatal(err)
			}
			m := testMessage()
			if tc.msg != nil {
				tc.msg(&m)
			}
			err = s.Send(context.Background(), m)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Send() error = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				var se *SendError
				if !errors.As(err, &se) {
					t.Fatalf("error %T is not a *SendError", err)
				}
				if se.Permanent != tc.wantPermanent || se.Attempts != tc.wantAttempts {
					t.Errorf("permanent=%v attempts=%d, want %v %d (%v)", se.Permanent, se.Attempts, tc.wantPermanent, tc.wantAttempts, err)
				}
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error leaks the password: %v", err)
				}
			}
			if strings.Contains(logs.String(), secret) {
				t.Errorf("log leaks the password: %s", logs.String())
			}
			if !equalDurations(sleeps, tc.wantSleeps) {
				t.Errorf("backoff sleeps = %v, want %v", sleeps, tc.wantSleeps)
			}
			if tc.srv == nil {
				return
			}
			tc.srv.mu.Lock()
			defer tc.srv.mu.Unlock()
			if len(tc.srv.messages) != tc.wantDelivered {
				t.Fatalf("delivered %d messages, want %d", len(tc.srv.messages), tc.wantDelivered)
			}
			if tc.wantDelivered == 0 {
				return
			}
			raw := string(tc.srv.messages[0])
			if strings.Contains(raw, "\r\nBcc:") {
				t.Errorf("header injection reached the wire:\n%s", raw)
			}
			for _, want := range []string{"Subject: GPU report Bcc: evil@example.org", "multipart/related", "multipart/alternative",
				"text/plain", "text/html", "Content-Id: <chart.png>", "To: <alice@example.org>, <bob@example.org>"} {
				if !strings.Contains(strings.ReplaceAll(raw, "Content-ID", "Content-Id"), want) {
					t.Errorf("message lacks %q:\n%s", want, raw)
				}
			}
			if got := tc.srv.rcpts[0]; len(got) != 2 {
				t.Errorf("envelope recipients = %v", got)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for valid
	}{
		{"minimal", Config{Host: "mx", From: "a@b.c"}, ""},
		{"missing host and from", Config{}, "host: required"},
		{"bad tls", Config{Host: "mx", From: "a@b.c", TLS: "ssl"}, `tls: "ssl"`},
		{"bad from", Config{Host: "mx", From: "nobody"}, "from:"},
		{"auth without user", Config{Host: "mx", From: "a@b.c", Auth: "plain"}, "needs a username"},
		{"CR/LF in host", Config{Host: "mx\r\nRCPT TO:<evil@example.org>", From: "a@b.c"}, "host:"},
		{"space in host", Config{Host: "mx example", From: "a@b.c"}, "host:"},
		{"newline in username", Config{Host: "mx", From: "a@b.c", Auth: "plain", Username: "gw\nx"}, "username:"},
		{"two password sources", Config{Host: "mx", From: "a@b.c", PasswordFile: "f", PasswordEnv: "E"}, "at most one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestNewSMTPMissingPassword(t *testing.T) {
	_, err := NewSMTP(Config{Host: "mx", From: "a@b.c", Username: "u", PasswordEnv: "NOPE"}, nil,
		WithGetenv(func(string) string { return "" }))
	if err == nil || !strings.Contains(err.Error(), "$NOPE") {
		t.Fatalf("error = %v, want it to name $NOPE", err)
	}
}

func TestSanitizeHeader(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                       "plain",
		"a\r\nBcc: x@y":               "a Bcc: x@y",
		"tab\there\x00nul":            "tab here nul",
		"  lots   of\n\n  space  ":    "lots of space",
		"ümlaut team — weekly report": "ümlaut team — weekly report",
	} {
		if got := SanitizeHeader(in); got != want {
			t.Errorf("SanitizeHeader(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSenderPrintsNoSecret(t *testing.T) {
	s, err := NewSMTP(Config{Host: "mx", From: "a@b.c", Username: "u", PasswordEnv: "PW"}, nil,
		WithGetenv(func(string) string { return "hunter2" }))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("sender", "smtp", s)
	for _, out := range []string{buf.String(), fmt.Sprintf("%v %+v %s", s, s, s)} {
		if strings.Contains(out, "hunter2") || !strings.Contains(out, "mx") {
			t.Errorf("printed sender: %s", out)
		}
	}
}

// TestAuthRefusalRedactedAndHeldOff: a relay that refuses the credentials
// and echoes the AUTH exchange. The error (which reaches the log, the audit
// and the web page) holds neither the password nor its base64; and the
// sender does not try the same credentials again before AuthHoldOff.
func TestAuthRefusalRedactedAndHeldOff(t *testing.T) {
	const secret = "s3cret-Pa55"
	srv := &fakeServer{user: "gw", pass: secret, echoAuth: true}
	port := startFake(t, srv)
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	s, err := NewSMTP(Config{Host: "127.0.0.1", Port: port, TLS: TLSNone, Auth: "plain", Username: "gw", PasswordEnv: "SMTP_PW",
		From: "gpuwatch@example.org", Timeout: 5 * time.Second, Backoff: time.Second},
		slog.New(slog.NewTextHandler(&logs, nil)),
		WithSleep(func(context.Context, time.Duration) error { return nil }),
		WithGetenv(func(string) string { return secret }),
		WithNow(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	encoded := base64.StdEncoding.EncodeToString([]byte("\x00gw\x00" + secret))
	err = s.Send(context.Background(), testMessage())
	var se *SendError
	if !errors.As(err, &se) || !se.Permanent {
		t.Fatalf("Send() = %v, want a permanent SendError", err)
	}
	for _, leak := range []string{secret, encoded, "\x1b"} {
		if strings.Contains(err.Error(), leak) || strings.Contains(logs.String(), leak) {
			t.Fatalf("%q leaked:\nerror: %v\nlog: %s", leak, err, logs.String())
		}
	}
	if !strings.Contains(err.Error(), "535") || !strings.Contains(err.Error(), "Authentication failed") {
		t.Errorf("redaction lost the reply code or its words: %v", err)
	}
	// Every later send within the hold-off fails at once, without dialing.
	for i := 0; i < 3; i++ {
		now = now.Add(10 * time.Minute)
		if err := s.Send(context.Background(), testMessage()); err == nil || !strings.Contains(err.Error(), "no new attempt before") {
			t.Fatalf("send during hold-off: %v", err)
		}
	}
	srv.mu.Lock()
	tried := len(srv.authTried)
	srv.mu.Unlock()
	if tried != 1 {
		t.Fatalf("server saw %d authentication attempts, want 1", tried)
	}
	now = now.Add(AuthHoldOff)
	_ = s.Send(context.Background(), testMessage())
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.authTried) != 2 {
		t.Fatalf("after the hold-off the server saw %d attempts, want 2", len(srv.authTried))
	}
}
