// Package secret keeps the secrets gpuwatch holds (the SMTP password, the
// JupyterHub token, bearer tokens, basic-auth credentials) out of every
// text it logs, audits or shows.
//
// A Redactor knows the values it was given and also recognises the shapes
// a secret takes in someone else's echo of a request: an Authorization
// header, "token …" and "Bearer …", the user:password of a URL, and
// password= or token= pairs. A Hub, or a proxy in front of it, that
// echoes the request's headers in its error body then leaks nothing.
package secret

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// Mask replaces every secret in text.
const Mask = "<redacted>"

// Redactor replaces secrets in text. The zero value redacts the shapes;
// Add teaches it values. It is safe for concurrent use.
type Redactor struct {
	mu     sync.RWMutex
	values []string
}

// Add registers secret values. Every non-empty value is masked, however
// short: a short password blanks out some ordinary text of a message,
// which is the lesser harm.
func (r *Redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if v == "" {
			continue
		}
		if !contains(r.values, v) {
			r.values = append(r.values, v)
		}
	}
	// Longest first, so that a secret containing another is masked whole.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

var shapes = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Authorization: token abc / Bearer abc / Basic dXNlcjpwYXNz (headers,
	// in any case, as a Hub or proxy might echo them; also Go's %v of a
	// header map: Authorization:[token abc]).
	{regexp.MustCompile(`(?i)(\b(?:proxy-)?authorization"?\s*[:=]\s*\[?"?)(?:(?:token|bearer|basic|digest)\s+)?[^\s"\],;]+`), "${1}" + Mask},
	{regexp.MustCompile(`(?i)\b(token|bearer|basic)(\s+)[A-Za-z0-9._~+/=:-]{12,}`), "${1}${2}" + Mask},
	// scheme://user:password@host
	{regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)[^/\s@]+@`), "${1}" + Mask + "@"},
	// password=…, passwd: …, secret=…, api_key=…, access_token=…
	// (a colon only before a quoted value, as YAML and JSON echo it: "token:
	// secret file …" in a message of ours stays readable).
	{regexp.MustCompile(`(?i)\b((?:[a-z_]*_)?(?:password|passwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|token))(\s*=\s*"?|"?\s*:\s*")[^\s"&,;]+`), "${1}${2}" + Mask},
	// X-Api-Key, X-Auth-Token and the like, echoed as headers.
	{regexp.MustCompile(`(?i)\b(x-[a-z-]*(?:key|token|secret)"?\s*[:=]\s*\[?"?)[^\s"\],;]+`), "${1}" + Mask},
}

// String returns s with every known value and every secret shape masked.
func (r *Redactor) String(s string) string {
	if r != nil {
		r.mu.RLock()
		for _, v := range r.values {
			s = strings.ReplaceAll(s, v, Mask)
		}
		r.mu.RUnlock()
	}
	for _, sh := range shapes {
		s = sh.re.ReplaceAllString(s, sh.repl)
	}
	return s
}

// Error returns err with its text redacted (nil for nil). errors.Is and
// errors.As still see the original chain.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// String redacts the shapes alone, for text with no Redactor at hand.
func String(s string) string { return (*Redactor)(nil).String(s) }

// MaxBytes bounds a secret file.
const MaxBytes = 4096

// ErrNotOneLine is returned for a secret file that holds nothing, or more
// than one line.
var ErrNotOneLine = errors.New("want exactly one secret on one line")

// ErrNotOneWord is returned for a token file whose token holds spaces.
var ErrNotOneWord = errors.New("want exactly one token (one word, one line)")

// ReadFile reads a secret file through the same checks as configuration
// files (a regular file, never a FIFO or device, bounded in size) and
// returns its one line without the line end (a password may hold spaces).
// The value is added to r (when not nil), so that it is masked from then
// on.
func ReadFile(path string, r *Redactor) (string, error) {
	data, err := configfile.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("secret file %s: %w", path, trimPath(err, path))
	}
	if len(data) > MaxBytes {
		return "", fmt.Errorf("secret file %s: %d bytes, more than %d", path, len(data), MaxBytes)
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("secret file %s: %w", path, ErrNotOneLine)
	}
	if r != nil {
		r.Add(v)
	}
	return v, nil
}

// ReadWord reads a token file as ReadFile does and refuses a token with
// blanks in it, which no header could carry.
func ReadWord(path string, r *Redactor) (string, error) {
	v, err := ReadFile(path, r)
	if err != nil {
		return "", err
	}
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsAny(v, " \t") {
		return "", fmt.Errorf("secret file %s: %w", path, ErrNotOneWord)
	}
	return v, nil
}

func trimPath(err error, path string) error {
	msg := strings.TrimPrefix(err.Error(), path+": ")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}
