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
	"regexp"
	"sort"
	"strings"
	"sync"
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
// which is the lesser harm. A value added to any Redactor is also masked
// by String and by every other Redactor of the process: a token read for
// one actuator is masked in the log line, the audit row and the error of
// another, which never saw it.
func (r *Redactor) Add(values ...string) {
	if r != &known {
		known.Add(values...)
	}
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
	if r != nil && r != &known {
		s = r.mask(s)
	}
	s = known.mask(s)
	for _, sh := range shapes {
		s = sh.re.ReplaceAllString(s, sh.repl)
	}
	return s
}

func (r *Redactor) mask(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, Mask)
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

// known holds every secret value this process has read or been given.
var known Redactor

// Register teaches the process-wide redaction values that are secrets but
// were not read through ReadFile (a password inside --storage.url).
func Register(values ...string) { known.Add(values...) }

// String returns s with every secret this process knows and every secret
// shape masked: the one redaction that the log handler, the audit log and
// the error printer all apply.
func String(s string) string { return known.String(s) }

// Error returns err with its text redacted by String (nil for nil).
func Error(err error) error { return known.Error(err) }
