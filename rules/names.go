package rules

import (
	"fmt"
	"sort"
)

// MetricNames returns the metric names an expression selects, sorted and
// without duplicates. It understands just enough PromQL (and Grafana's
// $variables) to tell a metric name from a function, an aggregation, a
// keyword, a label list, a label matcher, a range or a number, so a test can
// check every name against the catalogue without importing the Prometheus
// server module. Selectors by {__name__=...} are not reported.
func MetricNames(expr string) ([]string, error) {
	seen := map[string]bool{}
	s := expr
	i := 0
	skipSpace := func(j int) int {
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		return j
	}
	// skipGroup skips a bracketed group starting at s[j] == open, honouring
	// quoted strings inside it.
	skipGroup := func(j int, open, close byte) (int, error) {
		depth := 0
		for j < len(s) {
			switch c := s[j]; {
			case c == '"' || c == '\'' || c == '`':
				k, err := skipString(s, j)
				if err != nil {
					return 0, err
				}
				j = k
				continue
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, fmt.Errorf("unbalanced %c in %q", open, expr)
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(s, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			j, err := skipGroup(i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipGroup(i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '$': // a Grafana variable such as $__range or ${hostname}
			i++
			if i < len(s) && s[i] == '{' {
				j, err := skipGroup(i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = j
				continue
			}
			for i < len(s) && isIdent(s[i]) {
				i++
			}
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			// A number or a duration (1e9, 0.05, 10m): letters belong to it.
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			k := skipSpace(j)
			next := byte(0)
			if k < len(s) {
				next = s[k]
			}
			switch {
			case labelListKeywords[word]:
				i = j
				if next == '(' {
					e, err := skipGroup(k, '(', ')')
					if err != nil {
						return nil, err
					}
					i = e
				}
			case word == "offset":
				i = k
				if i < len(s) && s[i] == '-' {
					i++
				}
				for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
					i++
				}
			case keywords[word] || aggregations[word]:
				// An aggregation may put its label list before its argument:
				// sum by (x) (m); both parts are handled by the loop.
				i = j
			case next == '(':
				i = j // a function or an aggregation
			default:
				seen[word] = true
				i = j
			}
		default:
			i++
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

var aggregations = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true,
	"count_values": true, "limitk": true, "limit_ratio": true,
}

var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "atan2": true,
	"inf": true, "Inf": true, "nan": true, "NaN": true,
}

func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' && q != '`' {
			j++
			continue
		}
		if s[j] == q {
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unterminated string at offset %d in %q", i, s)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func isIdent(c byte) bool { return isIdentStart(c) || isDigit(c) }
