// Package promqltest reads PromQL the way Prometheus does, for tests: the
// metric names an expression (a rule's, or a Grafana panel's with its
// $variables) selects. It imports the Prometheus parser, so only test code
// may import it; the binaries stay free of it.
package promqltest

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// grafanaRange matches Grafana's interval macros, which stand for durations.
var grafanaRange = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)

// grafanaVar matches any other Grafana variable, $name or ${name} (with an
// optional :format).
var grafanaVar = regexp.MustCompile(`\$\{[A-Za-z0-9_]+(:[a-z]+)?\}|\$[A-Za-z_][A-Za-z0-9_]*`)

// promQL parses the PromQL that Prometheus 2.42 (Debian's) also accepts: no
// experimental functions.
var promQL = parser.NewParser(parser.Options{})

// Substitute replaces Grafana's variables so that Prometheus' parser accepts
// a dashboard query: interval macros by 5m, any other variable by 1 (inside a
// label matcher it is then a valid regular expression, outside a number).
func Substitute(expr string) string {
	expr = grafanaRange.ReplaceAllString(expr, "5m")
	return grafanaVar.ReplaceAllString(expr, "1")
}

// MetricNames returns the metric names expr selects, sorted and without
// duplicates, as Prometheus' own parser reads them. Grafana variables are
// substituted first (see Substitute). Selectors by a __name__ matcher that is
// not an equality are not reported.
func MetricNames(expr string) ([]string, error) {
	e, err := promQL.ParseExpr(Substitute(expr))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	seen := map[string]bool{}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			seen[vs.Name] = true
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
				seen[m.Value] = true
			}
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// OutsideRange returns the names of metrics in want that expr reads as plain
// instant vectors, not under a range (rate, increase, *_over_time): for a
// counter, a raw total where a rate was meant.
func OutsideRange(expr string, want func(name string) bool) ([]string, error) {
	e, err := promQL.ParseExpr(Substitute(expr))
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var out []string
	parser.Inspect(e, func(n parser.Node, path []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || !want(vs.Name) {
			return nil
		}
		for _, p := range path {
			if _, ok := p.(*parser.MatrixSelector); ok {
				return nil
			}
		}
		out = append(out, vs.Name)
		return nil
	})
	sort.Strings(out)
	return out, nil
}
