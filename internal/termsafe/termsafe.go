// Package termsafe makes text from users safe to print in a terminal table.
// Job names, user names, commands read from /proc and error text reach the
// audit and analyze tables; raw, an escape sequence clears the screen or
// recolours it, a newline or tab forges a row or a column, and a bidi
// override reorders what is shown.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String returns s with every control character (C0, DEL, C1), bidi control
// and invalid byte written as a Go escape (\x1b, \n, \t, \u202e), and a
// backslash doubled so that an escape in the input cannot pass for ours.
// Printable text, including other scripts, is kept as is.
func String(s string) string {
	if clean(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && unsafe(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// Lines is String for a message of several lines (a configuration file's
// list of problems): each line is made safe and the line breaks are kept.
func Lines(s string) string {
	parts := strings.Split(s, "\n")
	for i, l := range parts {
		parts[i] = String(l)
	}
	return strings.Join(parts, "\n")
}

func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// unsafe reports runes a terminal acts on instead of showing: control
// characters and the format characters that include the bidi controls.
func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// MaxName bounds a name someone else chose (a job's, a user's, a pod's, a
// namespace's, a host's as a telemetry label gives it) wherever gpuwatch
// writes it into a log line or the audit log: the longest real one, a
// Kubernetes object name, is 253 bytes, and a 1 MB job name would otherwise
// be copied into every line about that job.
const MaxName = 256

// Bound cuts s to at most max bytes, at a character boundary, and says how
// long it was, so that a cut name is never taken for a whole one.
func Bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	mark := fmt.Sprintf("…(%d bytes)", len(s))
	cut := max - len(mark)
	if cut < 0 {
		cut = 0
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
