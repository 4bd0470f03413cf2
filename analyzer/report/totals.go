package report

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// usageTotaler is the fast path of Data for the trend, which the store
// offers: summing per allocation in the database instead of materialising
// weeks of intervals. A Data without it (a test's) is summed interval by
// interval.
type usageTotaler interface {
	// UsageTotals sums usage per allocation for the periods
	// [bounds[i], bounds[i+1]).
	UsageTotals(ctx context.Context, bounds []time.Time) ([][]store.Usage, error)
}

var _ usageTotaler = (*store.Store)(nil)
