package slurm

import (
	"fmt"
	"strconv"
	"strings"
)

// Bounds of a host list's expansion. Slurm compresses a job's nodes into a
// host list ("gpu[01-04,07]"); what the controller prints is read as
// untrusted text, so a hostile or broken "n[0-99999999]" is refused before
// a single name is made rather than expanded into gigabytes.
const (
	// MaxHosts is the most node names one host list may expand to: more
	// than any job's allocation on the largest clusters.
	MaxHosts = 1 << 16
	// MaxHostlistBytes bounds the text of one host list.
	MaxHostlistBytes = 64 << 10
	// maxRangeDigits bounds one bound of a range, so that it fits an int
	// on every platform and its width stays sane.
	maxRangeDigits = 9
)

// ExpandHostlist returns the node names of a Slurm host list, in order:
// comma-separated names, each with any number of bracketed ranges
// ("gpu[01-04,07]", "r[1-2]n[1-2]"), zero-padded to the width of a range's
// lower bound as Slurm writes them. An empty list is no node. A list that
// is malformed, names an invalid node or expands beyond MaxHosts is
// refused with ErrInvalid.
func ExpandHostlist(list string) ([]string, error) {
	if len(list) > MaxHostlistBytes {
		return nil, fmt.Errorf("host list of %d bytes, more than %d: %w", len(list), MaxHostlistBytes, ErrInvalid)
	}
	if list == "" {
		return nil, nil
	}
	exprs, err := splitHostlist(list)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range exprs {
		names, err := expandOne(e, MaxHosts-len(out))
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", clip(list), err)
		}
		out = append(out, names...)
	}
	return out, nil
}

// clip shortens a hostile list for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// splitHostlist splits at the commas outside brackets.
func splitHostlist(list string) ([]string, error) {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '[':
			if depth++; depth > 1 {
				return nil, fmt.Errorf("host list %q: nested brackets: %w", clip(list), ErrInvalid)
			}
		case ']':
			if depth--; depth < 0 {
				return nil, fmt.Errorf("host list %q: unbalanced ']': %w", clip(list), ErrInvalid)
			}
		case ',':
			if depth == 0 {
				out = append(out, list[from:i])
				from = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("host list %q: unclosed '[': %w", clip(list), ErrInvalid)
	}
	return append(out, list[from:]), nil
}

// span is one numeric range of a bracket, lo to hi, written width wide.
type span struct{ lo, hi, width int }

// part is a literal text followed by the ranges of one bracket (none for
// the text after the last bracket).
type part struct {
	text  string
	spans []span
}

// expandOne expands one name with its brackets into at most room names.
func expandOne(expr string, room int) ([]string, error) {
	if expr == "" {
		return nil, fmt.Errorf("empty name: %w", ErrInvalid)
	}
	parts, count, err := parseExpr(expr)
	if err != nil {
		return nil, err
	}
	if count > room {
		return nil, fmt.Errorf("expands beyond %d names: %w", MaxHosts, ErrInvalid)
	}
	names := []string{""}
	for _, p := range parts {
		next := make([]string, 0, len(names)*max(1, width(p.spans)))
		for _, n := range names {
			if len(p.spans) == 0 {
				next = append(next, n+p.text)
				continue
			}
			for _, s := range p.spans {
				for v := s.lo; v <= s.hi; v++ {
					next = append(next, n+p.text+pad(v, s.width))
				}
			}
		}
		names = next
	}
	for _, n := range names {
		if !ValidNodeName(n) {
			return nil, fmt.Errorf("%q is not a node name: %w", clip(n), ErrInvalid)
		}
	}
	return names, nil
}

// width is the number of values a bracket's spans hold.
func width(spans []span) int {
	n := 0
	for _, s := range spans {
		n += s.hi - s.lo + 1
	}
	return n
}

func pad(v, w int) string {
	s := strconv.Itoa(v)
	if len(s) < w {
		s = strings.Repeat("0", w-len(s)) + s
	}
	return s
}

// parseExpr reads "text[ranges]text[ranges]text" and counts the names it
// makes, refusing once the count passes MaxHosts (before any is made).
func parseExpr(expr string) ([]part, int, error) {
	var parts []part
	count := 1
	for rest := expr; rest != ""; {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.IndexByte(rest, ']') >= 0 {
				return nil, 0, fmt.Errorf("unbalanced ']': %w", ErrInvalid)
			}
			parts = append(parts, part{text: rest})
			break
		}
		end := strings.IndexByte(rest, ']')
		if end < open {
			return nil, 0, fmt.Errorf("unbalanced brackets: %w", ErrInvalid)
		}
		spans, err := parseSpans(rest[open+1 : end])
		if err != nil {
			return nil, 0, err
		}
		n := width(spans)
		if count > MaxHosts/n {
			return nil, 0, fmt.Errorf("expands beyond %d names: %w", MaxHosts, ErrInvalid)
		}
		count *= n
		parts = append(parts, part{text: rest[:open], spans: spans})
		rest = rest[end+1:]
	}
	return parts, count, nil
}

// parseSpans reads a bracket's "01-04,07", refusing any range that alone
// passes MaxHosts.
func parseSpans(s string) ([]span, error) {
	if s == "" {
		return nil, fmt.Errorf("empty brackets: %w", ErrInvalid)
	}
	var out []span
	total := 0
	for _, r := range strings.Split(s, ",") {
		loText, hiText, isRange := strings.Cut(r, "-")
		if !isRange {
			hiText = loText
		}
		lo, err := rangeBound(loText)
		if err != nil {
			return nil, err
		}
		hi, err := rangeBound(hiText)
		if err != nil {
			return nil, err
		}
		if hi < lo {
			return nil, fmt.Errorf("range %q runs backwards: %w", r, ErrInvalid)
		}
		if total += hi - lo + 1; total > MaxHosts {
			return nil, fmt.Errorf("range %q expands beyond %d names: %w", r, MaxHosts, ErrInvalid)
		}
		out = append(out, span{lo: lo, hi: hi, width: len(loText)})
	}
	return out, nil
}

func rangeBound(s string) (int, error) {
	if s == "" || len(s) > maxRangeDigits {
		return 0, fmt.Errorf("range bound %q: empty or over %d digits: %w", s, maxRangeDigits, ErrInvalid)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("range bound %q: not a number: %w", clip(s), ErrInvalid)
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("range bound %q: %w", s, ErrInvalid)
	}
	return v, nil
}
