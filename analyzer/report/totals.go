package report

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// UsageTotals are a team's summed usage over one period.
type UsageTotals = store.Totals

// usageTotaler is the fast path of Data for the trend, which the store
// offers: summing in the database instead of materialising weeks of
// intervals. A Data without it (a test's) is summed interval by interval.
type usageTotaler interface {
	// UsageTotals sums usage per team for the periods [bounds[i], bounds[i+1]).
	UsageTotals(ctx context.Context, bounds []time.Time) (map[string][]UsageTotals, error)
}

var _ usageTotaler = (*store.Store)(nil)
