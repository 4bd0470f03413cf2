package plan

import (
	"context"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// Source plans any window on request and keeps the last answer, so that
// the surfaces asking for the same window (a report and its team reports)
// share one plan.
type Source struct {
	Querier query.Querier
	Options Options

	mu       sync.Mutex
	from, to time.Time
	last     *Plan
}

// PlanBetween returns the plan of [from, to).
func (s *Source) PlanBetween(ctx context.Context, from, to time.Time) (*Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && s.from.Equal(from) && s.to.Equal(to) {
		return s.last, nil
	}
	p, err := Build(ctx, s.Querier, from, to, s.Options)
	if err != nil {
		return nil, err
	}
	s.from, s.to, s.last = from, to, p
	return p, nil
}
