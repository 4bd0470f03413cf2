package report

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// UsageTotals are a team's summed usage over one period.
type UsageTotals struct{ Allocated, Active float64 }

// usageTotaler is an optional fast path of Data for the trend: summing in
// the database instead of materialising weeks of intervals.
type usageTotaler interface {
	// UsageTotals sums usage per team for the periods [bounds[i], bounds[i+1]).
	UsageTotals(ctx context.Context, bounds []time.Time) (map[string][]UsageTotals, error)
}

// StoreData reads reports' data from the store, summing trend weeks in
// SQL. It depends on the store's usage table as store.go defines it.
type StoreData struct{ *store.Store }

// UsageTotals implements usageTotaler.
func (s StoreData) UsageTotals(ctx context.Context, bounds []time.Time) (map[string][]UsageTotals, error) {
	if len(bounds) < 2 {
		return map[string][]UsageTotals{}, nil
	}
	var cases strings.Builder
	args := []any{}
	for i := 1; i < len(bounds)-1; i++ {
		fmt.Fprintf(&cases, " WHEN start_ms < ? THEN %d", i-1)
		args = append(args, bounds[i].UnixMilli())
	}
	q := `SELECT team, CASE` + cases.String() + fmt.Sprintf(` ELSE %d END AS b, SUM(allocated_gpu_hours), SUM(active_gpu_hours)
		FROM usage WHERE start_ms >= ? AND start_ms < ? GROUP BY team, b`, len(bounds)-2)
	if len(bounds) == 2 {
		q = `SELECT team, 0, SUM(allocated_gpu_hours), SUM(active_gpu_hours) FROM usage WHERE start_ms >= ? AND start_ms < ? GROUP BY team`
	}
	args = append(args, bounds[0].UnixMilli(), bounds[len(bounds)-1].UnixMilli())
	rows, err := s.DB().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	defer rows.Close()
	out := map[string][]UsageTotals{}
	for rows.Next() {
		var team string
		var b int
		var t UsageTotals
		if err := rows.Scan(&team, &b, &t.Allocated, &t.Active); err != nil {
			return nil, fmt.Errorf("sum usage: %w", err)
		}
		if out[team] == nil {
			out[team] = make([]UsageTotals, len(bounds)-1)
		}
		if b >= 0 && b < len(bounds)-1 {
			out[team][b] = t
		}
	}
	return out, rows.Err()
}
