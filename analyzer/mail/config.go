package mail

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/secret"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// TLS modes of an SMTP connection.
const (
	TLSStartTLS = "starttls" // plain connect, then STARTTLS (mandatory)
	TLSImplicit = "tls"      // TLS from the first byte (SMTPS, port 465)
	TLSNone     = "none"     // no encryption (local relays, tests)
)

// Config is the SMTP section of a configuration file.
type Config struct {
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// TLS is starttls (default), tls or none.
	TLS string `yaml:"tls"`
	// CAFile holds PEM certificates to verify the server with instead of
	// the system's (an internal CA).
	CAFile string `yaml:"ca_file"`
	// InsecureSkipVerify disables certificate checks (self-signed relays).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
	// Auth is auto (default when a username is set), plain, login,
	// cram-md5 or none.
	Auth     string `yaml:"auth"`
	Username string `yaml:"username"`
	// The password comes from a file or an environment variable, never from
	// the configuration itself, so configs can be shared and logged.
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
	From         string `yaml:"from"`
	// Timeout bounds one connection attempt (default 30s).
	Timeout configfile.Duration `yaml:"timeout"`
	// Retries after the first attempt for transient failures (default 3).
	Retries *int `yaml:"retries"`
	// Backoff before the first retry; doubled each time, capped at 1m
	// (default 2s).
	Backoff configfile.Duration `yaml:"backoff"`
}

// Defaults fills unset fields.
func (c *Config) Defaults() {
	if c.TLS == "" {
		c.TLS = TLSStartTLS
	}
	if c.Port == 0 {
		switch c.TLS {
		case TLSImplicit:
			c.Port = 465
		case TLSNone:
			c.Port = 25
		default:
			c.Port = 587
		}
	}
	if c.Auth == "" {
		c.Auth = "none"
		if c.Username != "" {
			c.Auth = "auto"
		}
	}
	if c.Timeout == 0 {
		c.Timeout = configfile.Duration(30 * time.Second)
	}
	if c.Retries == nil {
		r := 3
		c.Retries = &r
	}
	if c.Backoff == 0 {
		c.Backoff = configfile.Duration(2 * time.Second)
	}
}

// Validate reports configuration errors, naming the offending key.
func (c *Config) Validate() error {
	var errs []error
	if c.Host == "" {
		errs = append(errs, errors.New("host: required"))
	} else if strings.ContainsFunc(c.Host, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' || r == '@' }) {
		// CR/LF would let the name inject SMTP commands or headers.
		errs = append(errs, fmt.Errorf("host: %q is not a host name (spaces, control characters, / or @)", c.Host))
	}
	if c.Username != "" && strings.ContainsFunc(c.Username, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, errors.New("username: holds control characters"))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port: %d out of range", c.Port))
	}
	switch c.TLS {
	case TLSStartTLS, TLSImplicit, TLSNone, "":
	default:
		errs = append(errs, fmt.Errorf("tls: %q is not starttls, tls or none", c.TLS))
	}
	switch c.Auth {
	case "", "auto", "plain", "login", "cram-md5", "none":
	default:
		errs = append(errs, fmt.Errorf("auth: %q is not auto, plain, login, cram-md5 or none", c.Auth))
	}
	if c.Auth != "" && c.Auth != "none" && c.Username == "" {
		errs = append(errs, fmt.Errorf("auth: %s needs a username", c.Auth))
	}
	if c.PasswordFile != "" && c.PasswordEnv != "" {
		errs = append(errs, errors.New("password_file and password_env: set at most one"))
	}
	if c.From == "" {
		errs = append(errs, errors.New("from: required"))
	} else if _, err := mail.ParseAddress(c.From); err != nil {
		errs = append(errs, fmt.Errorf("from: %q: %w", c.From, err))
	}
	if c.Retries != nil && (*c.Retries < 0 || *c.Retries > 20) {
		errs = append(errs, fmt.Errorf("retries: %d not in [0, 20]", *c.Retries))
	}
	if c.Timeout < 0 || c.Backoff < 0 {
		errs = append(errs, errors.New("timeout and backoff: must not be negative"))
	}
	return errors.Join(errs...)
}

// password reads the secret named by the config. The value is never put
// into an error or a log line.
func (c *Config) password(getenv func(string) string) (string, error) {
	switch {
	case c.PasswordFile != "":
		v, err := secret.ReadFile(c.PasswordFile, nil)
		if err != nil {
			return "", fmt.Errorf("smtp password_file: %w", err)
		}
		return v, nil
	case c.PasswordEnv != "":
		v := getenv(c.PasswordEnv)
		if v == "" {
			return "", fmt.Errorf("smtp password_env: $%s is empty or unset", c.PasswordEnv)
		}
		return v, nil
	}
	return "", nil
}
