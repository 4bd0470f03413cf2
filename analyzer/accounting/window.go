package accounting

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// Records are the analyzer's saved usage intervals and findings (the
// store), which a window's book is built from.
type Records interface {
	UsageBetween(ctx context.Context, from, to time.Time) ([]store.Usage, error)
	FindingsBetween(ctx context.Context, from, to time.Time) ([]finding.Finding, error)
}

// Books builds the book of a window from the records, as the reports do,
// for surfaces that show a window's GPU-hours without building a report
// (the planner's team view).
type Books struct {
	Records Records
	// Step is the analyzer's step: a window is put on its grid (OnGrid)
	// before it is read. Zero takes windows as on the grid already.
	Step time.Duration
}

// Book is the book of [from, to), on the step grid.
func (b Books) Book(ctx context.Context, from, to time.Time) (*Book, error) {
	if b.Step > 0 {
		from, to = OnGrid(from, to, b.Step)
	}
	usage, err := b.Records.UsageBetween(ctx, from, to)
	if err != nil {
		return nil, err
	}
	fs, err := Findings(ctx, b.Records, from, to)
	if err != nil {
		return nil, err
	}
	return Build(from, to, usage, fs), nil
}

// Teams sums the book's allocations per team ("" for allocations of no
// known team). Orphaned processes belong to no team and are left out.
func (b *Book) Teams() map[string]Totals {
	return b.teams(func(*Allocation) bool { return true })
}

// SharedTeams is Teams over the allocations that held shares of shared
// GPUs only: per team, the shares' GPU-hours and what was made of them.
func (b *Book) SharedTeams() map[string]Totals {
	return b.teams((*Allocation).Shared)
}

// teams sums the allocations keep takes per team.
func (b *Book) teams(keep func(*Allocation) bool) map[string]Totals {
	out := map[string]Totals{}
	// In key order: a sum of floats depends on its order, and the plan and
	// the reports must read the same hours for the same book every time.
	for _, k := range slices.Sorted(maps.Keys(b.Allocations)) {
		a := b.Allocations[k]
		if !keep(a) {
			continue
		}
		t := out[a.Team]
		t.Allocated += a.Allocated
		t.Used += a.Used
		t.Wasted += a.Wasted
		t.OverLimit += a.OverLimit
		t.Degraded += a.Degraded
		out[a.Team] = t
	}
	return out
}
