package jobview

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// scoped narrows every series selector of the queries it passes on to the
// job's devices, so the fleet-wide feature queries of the engine read one
// job's GPUs (and whoever else held them in the window, which the detectors
// need to tell a job that ended from one whose data is missing).
type scoped struct {
	q       query.Querier
	matcher *labels.Matcher
}

func newScoped(q query.Querier, uuids []string) (*scoped, error) {
	quoted := make([]string, len(uuids))
	for i, u := range uuids {
		quoted[i] = regexp.QuoteMeta(u)
	}
	m, err := labels.NewMatcher(labels.MatchRegexp, schema.LabelUUID, strings.Join(quoted, "|"))
	if err != nil {
		return nil, fmt.Errorf("device matcher: %w", err)
	}
	return &scoped{q: q, matcher: m}, nil
}

func (s *scoped) rewrite(expr string) (string, error) {
	e, err := promParser.ParseExpr(expr)
	if err != nil {
		return "", fmt.Errorf("scope %q: %w", expr, err)
	}
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			vs.LabelMatchers = append(vs.LabelMatchers, s.matcher)
		}
		return nil
	})
	return e.String(), nil
}

// Query implements query.Querier.
func (s *scoped) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	x, err := s.rewrite(expr)
	if err != nil {
		return nil, err
	}
	return s.q.Query(ctx, x, ts)
}

// QueryRange implements query.Querier.
func (s *scoped) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	x, err := s.rewrite(expr)
	if err != nil {
		return nil, err
	}
	return s.q.QueryRange(ctx, x, r)
}

var promParser = parser.NewParser(parser.Options{})
