package mail

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/textproto"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"

	"github.com/gpuwatch/gpuwatch/internal/secret"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// SMTP is a Sender that delivers through one SMTP server.
type SMTP struct {
	cfg    Config
	tls    *tls.Config
	pass   string
	logger *slog.Logger
	sleep  func(ctx context.Context, d time.Duration) error
	getenv func(string) string
	now    func() time.Time

	mu           sync.Mutex
	authFailedAt time.Time // last refused authentication
	authErr      error
}

// AuthHoldOff is how long a sender whose credentials the server refused
// (530, 534, 535, 538) sends nothing: every caller, every cycle, would
// otherwise try the same bad password again and risk locking the account.
// A restart with a fixed configuration starts afresh.
const AuthHoldOff = time.Hour

// LogValue keeps the sender's secrets out of logs: only the server shows.
func (s *SMTP) LogValue() slog.Value {
	return slog.GroupValue(slog.String("host", s.cfg.Host), slog.Int("port", s.cfg.Port), slog.String("tls", s.cfg.TLS))
}

// String is the sender as %v prints it, without secrets.
func (s *SMTP) String() string {
	return fmt.Sprintf("smtp://%s:%d (%s)", s.cfg.Host, s.cfg.Port, s.cfg.TLS)
}

// Option adjusts an SMTP sender (tests inject a fast clock).
type Option func(*SMTP)

// WithSleep replaces the wait between retries.
func WithSleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(s *SMTP) { s.sleep = f }
}

// WithNow replaces the clock of the authentication hold-off.
func WithNow(f func() time.Time) Option { return func(s *SMTP) { s.now = f } }

// WithGetenv replaces os.Getenv for password_env.
func WithGetenv(f func(string) string) Option { return func(s *SMTP) { s.getenv = f } }

// NewSMTP validates cfg and reads the password once, so a missing secret is
// reported at start-up rather than at the first report.
func NewSMTP(cfg Config, logger *slog.Logger, opts ...Option) (*SMTP, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("smtp config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &SMTP{cfg: cfg, logger: logger, sleep: sleepCtx, getenv: os.Getenv, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	p, err := cfg.password(s.getenv)
	if err != nil {
		return nil, err
	}
	s.pass = p
	s.tls = &tls.Config{ServerName: cfg.Host, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("smtp ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("smtp ca_file %s: no PEM certificates", cfg.CAFile)
		}
		s.tls.RootCAs = pool
	}
	//nolint:gosec // only when explicitly configured, for self-signed relays
	s.tls.InsecureSkipVerify = cfg.InsecureSkipVerify
	return s, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SendError is a failed delivery after all attempts.
type SendError struct {
	Attempts int
	// Permanent is true when retrying the same message cannot help
	// (an invalid address, a 5xx reply such as refused authentication).
	Permanent bool
	Err       error
}

func (e *SendError) Error() string {
	kind := "transient"
	if e.Permanent {
		kind = "permanent"
	}
	return fmt.Sprintf("send mail (%s, %d attempts): %v", kind, e.Attempts, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// Send delivers m, retrying transient failures with exponential backoff.
// The server's reply text in an error is redacted (see redact): it may
// echo the AUTH exchange, and errors reach the log, the audit and the web page.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	if err := s.heldOff(); err != nil {
		return err
	}
	attempts := 1 + *s.cfg.Retries
	wait := s.cfg.Backoff.D()
	var last error
	for i := 1; i <= attempts; i++ {
		msg, err := s.build(m)
		if err != nil {
			return &SendError{Attempts: i, Permanent: true, Err: err}
		}
		raw := s.deliver(ctx, msg)
		if raw == nil {
			s.logger.Debug("mail sent", "subject", SanitizeHeader(m.Subject), "recipients", len(m.To), "attempt", i)
			return nil
		}
		last = s.redact(raw)
		if authRefused(raw) {
			s.mu.Lock()
			s.authFailedAt, s.authErr = s.now(), last
			s.mu.Unlock()
			s.logger.Error("SMTP server refused the credentials; no mail is sent until the hold-off ends", "hold_off", AuthHoldOff, "err", last)
		}
		if permanent(raw) {
			return &SendError{Attempts: i, Permanent: true, Err: last}
		}
		if i == attempts || ctx.Err() != nil {
			break
		}
		s.logger.Warn("mail delivery failed, retrying", "subject", SanitizeHeader(m.Subject), "attempt", i, "retry_in", wait, "err", last)
		if err := s.sleep(ctx, wait); err != nil {
			return &SendError{Attempts: i, Err: fmt.Errorf("%w (retry aborted: %v)", last, err)}
		}
		wait = min(2*wait, time.Minute)
	}
	return &SendError{Attempts: attempts, Err: last}
}

// heldOff refuses to dial while a refused authentication is recent.
func (s *SMTP) heldOff() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.authErr == nil || !s.now().Before(s.authFailedAt.Add(AuthHoldOff)) {
		return nil
	}
	return &SendError{Permanent: true, Err: fmt.Errorf("not sent: the server refused the credentials at %s; no new attempt before %s: %w",
		s.authFailedAt.UTC().Format(time.RFC3339), s.authFailedAt.Add(AuthHoldOff).UTC().Format(time.RFC3339), s.authErr)}
}

// replyCode is the SMTP reply code an error carries, 0 when none.
func replyCode(err error) int {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return tp.Code
	}
	var se *gomail.SendError
	if errors.As(err, &se) {
		return se.ErrorCode()
	}
	return 0
}

// authRefused is true for the replies that say the credentials are wrong
// or missing: retrying them is what locks an account.
func authRefused(err error) bool {
	switch replyCode(err) {
	case 530, 534, 535, 538:
		return true
	}
	return false
}

// base64Run matches what an echoed AUTH PLAIN/LOGIN exchange looks like: a
// long run of the base64 alphabet. Runs of 12 to 19 letters count only with
// a digit, +, / or =, so that words such as "Authentication" stay readable.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{12,}={0,2}`)

func looksEncoded(s string) bool {
	return len(s) >= 20 || strings.ContainsAny(s, "0123456789+/=")
}

// maxErrorText bounds the server's text kept in an error.
const maxErrorText = 300

// redact turns a delivery error into text that is safe to log, audit and
// show: the password (plain and in base64, as AUTH PLAIN and LOGIN send it)
// and any long base64 run are replaced by [redacted], terminal controls
// escaped, and the whole cut to maxErrorText bytes.
func (s *SMTP) redact(err error) error {
	var red secret.Redactor
	if s.pass != "" {
		red.Add(s.pass,
			base64.StdEncoding.EncodeToString([]byte(s.pass)),
			base64.StdEncoding.EncodeToString([]byte("\x00"+s.cfg.Username+"\x00"+s.pass)),
			base64.StdEncoding.EncodeToString([]byte(s.cfg.Username+"\x00"+s.cfg.Username+"\x00"+s.pass)))
	}
	msg := red.String(err.Error())
	msg = base64Run.ReplaceAllStringFunc(msg, func(run string) string {
		if looksEncoded(run) {
			return "[redacted]"
		}
		return run
	})
	msg = termsafe.String(msg)
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	return &redactedError{msg: msg, code: replyCode(err)}
}

// redactedError is a delivery error after redaction; it keeps the reply
// code for whoever asks.
type redactedError struct {
	msg  string
	code int
}

func (e *redactedError) Error() string { return e.msg }

// Code is the SMTP reply code, 0 when the failure had none.
func (e *redactedError) Code() int { return e.code }

// permanent tells errors worth retrying from those that are not: SMTP 5xx
// replies (bad recipient, authentication refused) and go-mail's
// non-temporary send errors. Connection failures are transient.
func permanent(err error) bool {
	var tp *textproto.Error
	if errors.As(err, &tp) {
		return tp.Code >= 500
	}
	var se *gomail.SendError
	if errors.As(err, &se) {
		if code := se.ErrorCode(); code > 0 {
			return code >= 500
		}
		return !se.IsTemp()
	}
	return false
}

func (s *SMTP) build(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.From(SanitizeHeader(s.cfg.From)); err != nil {
		return nil, fmt.Errorf("from %q: %w", s.cfg.From, err)
	}
	if len(m.To) == 0 {
		return nil, errors.New("no recipients")
	}
	to := make([]string, len(m.To))
	for i, a := range m.To {
		to[i] = SanitizeHeader(a)
	}
	if err := msg.To(to...); err != nil {
		return nil, fmt.Errorf("recipients: %w", err)
	}
	msg.Subject(SanitizeHeader(m.Subject))
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	for _, in := range m.Inline {
		cid := SanitizeHeader(in.CID)
		ct := in.ContentType
		if ct == "" {
			ct = "image/png"
		}
		if err := msg.EmbedReader(cid, bytes.NewReader(in.Data),
			gomail.WithFileContentID("<"+cid+">"), gomail.WithFileContentType(gomail.ContentType(ct))); err != nil {
			return nil, fmt.Errorf("embed %s: %w", cid, err)
		}
	}
	return msg, nil
}

func (s *SMTP) deliver(ctx context.Context, msg *gomail.Msg) error {
	opts := []gomail.Option{gomail.WithPort(s.cfg.Port), gomail.WithTimeout(s.cfg.Timeout.D())}
	switch s.cfg.TLS {
	case TLSImplicit:
		opts = append(opts, gomail.WithSSL())
	case TLSNone:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	opts = append(opts, gomail.WithTLSConfig(s.tls.Clone()))
	if s.cfg.Auth != "none" {
		opts = append(opts, gomail.WithSMTPAuth(authType(s.cfg.Auth)),
			gomail.WithUsername(s.cfg.Username), gomail.WithPassword(s.pass))
	}
	c, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return fmt.Errorf("smtp client %s:%d: %w", s.cfg.Host, s.cfg.Port, err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("smtp %s:%d: %w", s.cfg.Host, s.cfg.Port, err)
	}
	return nil
}

func authType(a string) gomail.SMTPAuthType {
	switch a {
	case "plain":
		return gomail.SMTPAuthPlain
	case "login":
		return gomail.SMTPAuthLogin
	case "cram-md5":
		return gomail.SMTPAuthCramMD5
	}
	return gomail.SMTPAuthAutoDiscover
}
