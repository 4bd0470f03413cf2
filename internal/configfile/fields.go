package configfile

import (
	"fmt"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// The field types below validate themselves as they are decoded, so a
// loader declares what a key holds and keeps only the rules that join two
// keys. Each refuses a bad value with a *yaml.TypeError: the decoder then
// goes on and Decode reports every bad value of the file, each at its key,
// not only the first.

// FieldError is the error an UnmarshalYAML method returns for a bad value
// at n: Decode turns it into "file:line: key.path: problem".
func FieldError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, fmt.Sprintf(format, args...))}}
}

// scalar decodes a plain scalar value into out, refusing maps and lists.
func scalar(n *yaml.Node, want string, out any) error {
	if n.Kind != yaml.ScalarNode {
		return FieldError(n, "want %s", want)
	}
	return n.Decode(out)
}

// ParseDuration parses gpuwatch's one duration syntax, Prometheus': units
// ms, s, m, h, d (24h) and w (7d), combined largest first ("1d12h").
func ParseDuration(s string) (time.Duration, error) {
	d, err := model.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("duration %q: want e.g. 90s, 15m, 1h30m, 1d or 2w", s)
	}
	return time.Duration(d), nil
}

// FormatDuration writes d in the syntax ParseDuration reads.
func FormatDuration(d time.Duration) string { return model.Duration(d).String() }

// Duration is a positive duration in a configuration file: an interval,
// a window, a timeout, where zero would mean "never" or "always".
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return FormatDuration(time.Duration(d)) }

// UnmarshalYAML parses the one syntax and refuses zero and negatives.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := durationAt(n)
	if err != nil {
		return err
	}
	if v <= 0 {
		return FieldError(n, "duration %q must be positive", n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the one syntax.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Delay is a duration of zero or more: how long to wait before something,
// where zero means at once.
type Delay time.Duration

// D returns the time.Duration.
func (d Delay) D() time.Duration { return time.Duration(d) }

func (d Delay) String() string { return FormatDuration(time.Duration(d)) }

// UnmarshalYAML parses the one syntax and refuses negatives.
func (d *Delay) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.HasPrefix(strings.TrimSpace(n.Value), "-") {
		return FieldError(n, "duration %q must not be negative", n.Value)
	}
	v, err := durationAt(n)
	if err != nil {
		return err
	}
	*d = Delay(v)
	return nil
}

// MarshalYAML writes the one syntax.
func (d Delay) MarshalYAML() (any, error) { return d.String(), nil }

func durationAt(n *yaml.Node) (time.Duration, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, FieldError(n, "want a duration such as 90s, 1h or 1d")
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return 0, FieldError(n, "%v", err)
	}
	return v, nil
}

// Count is an integer of zero or more: a limit, a number of attempts.
type Count int

// UnmarshalYAML refuses negatives.
func (c *Count) UnmarshalYAML(n *yaml.Node) error {
	var v int
	if err := scalar(n, "a whole number", &v); err != nil {
		return err
	}
	if v < 0 {
		return FieldError(n, "must be zero or more, got %d", v)
	}
	*c = Count(v)
	return nil
}

// Amount is a finite number of zero or more: hours, bytes, a price.
type Amount float64

// UnmarshalYAML refuses negatives (NaN and infinities never reach it:
// Decode refuses them for every field).
func (a *Amount) UnmarshalYAML(n *yaml.Node) error {
	var v float64
	if err := scalar(n, "a number", &v); err != nil {
		return err
	}
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return FieldError(n, "must be zero or more and finite, got %v", n.Value)
	}
	*a = Amount(v)
	return nil
}

// Ratio is a number in [0, 1].
type Ratio float64

// UnmarshalYAML checks the range, naming the line on error.
func (r *Ratio) UnmarshalYAML(n *yaml.Node) error {
	var v float64
	if err := n.Decode(&v); err != nil {
		return err
	}
	if v < 0 || v > 1 {
		return FieldError(n, "%v is not a ratio between 0 and 1", v)
	}
	*r = Ratio(v)
	return nil
}

// Percent is a number in [0, 100].
type Percent float64

// UnmarshalYAML checks the range, naming the line on error.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	var v float64
	if err := n.Decode(&v); err != nil {
		return err
	}
	if v < 0 || v > 100 {
		return FieldError(n, "%v is not a percentage between 0 and 100", v)
	}
	*p = Percent(v)
	return nil
}

// Time is an instant written in RFC 3339 ("2026-12-31T00:00:00Z").
type Time time.Time

// T returns the time.Time.
func (t Time) T() time.Time { return time.Time(t) }

// UnmarshalYAML parses RFC 3339 only: a date without a zone would mean a
// different instant on every host.
func (t *Time) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return FieldError(n, "want a time in RFC 3339, e.g. 2026-12-31T00:00:00Z")
	}
	v, err := time.Parse(time.RFC3339, strings.TrimSpace(n.Value))
	if err != nil {
		return FieldError(n, "invalid time %q (use RFC 3339, e.g. 2026-12-31T00:00:00Z)", n.Value)
	}
	*t = Time(v)
	return nil
}

// Glob is a shell pattern as path.Match reads it ("prod-*", "gpu[0-9]").
type Glob string

// ValidGlob reports whether p is a pattern path.Match accepts.
func ValidGlob(p string) bool {
	_, err := path.Match(p, "")
	return p != "" && err == nil
}

// UnmarshalYAML refuses an empty or malformed pattern, which would match
// nothing and let a rule or an exemption silently fall away.
func (g *Glob) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := scalar(n, "a pattern such as prod-*", &v); err != nil {
		return err
	}
	if !ValidGlob(v) {
		return FieldError(n, "invalid pattern %q", v)
	}
	*g = Glob(v)
	return nil
}

// Globs converts a list of patterns to strings.
func Globs(gs []Glob) []string {
	if gs == nil {
		return nil
	}
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = string(g)
	}
	return out
}

// HTTPURL is an absolute http or https URL.
type HTTPURL string

// UnmarshalYAML refuses a relative URL or another scheme.
func (u *HTTPURL) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := scalar(n, "a URL", &v); err != nil {
		return err
	}
	p, err := url.Parse(v)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return FieldError(n, "must be an absolute http(s) URL, got %s", URLOrigin(v))
	}
	*u = HTTPURL(v)
	return nil
}

// URLOrigin is what an error may say of a URL: its scheme and host. A
// webhook's token lives in its path (Slack's /services/T/B/secret), a
// signature in its query (Teams' &sig=), a password in its user info:
// none of them is ever printed. A URL that does not parse into a host is
// not shown at all, since where its secret sits cannot be told.
func URLOrigin(v string) string {
	p, err := url.Parse(v)
	if err != nil || p.Host == "" {
		return "a URL (not shown: it may hold a token)"
	}
	if p.Scheme == "" {
		return strconv.Quote("//" + p.Host)
	}
	return strconv.Quote(p.Scheme + "://" + p.Host)
}

// OneOf decodes a scalar into out and refuses it unless it is one of
// the allowed values; what names the field in the message ("action").
func OneOf[T ~string](n *yaml.Node, out *T, what string, allowed ...T) error {
	var v string
	if err := scalar(n, what, &v); err != nil {
		return err
	}
	for _, a := range allowed {
		if T(v) == a {
			*out = a
			return nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return FieldError(n, "unknown %s %q (one of %s)", what, v, strings.Join(names, ", "))
}
