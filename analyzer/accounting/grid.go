package accounting

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// The analyzer judges fixed steps on one grid: each step starts at a
// multiple of the step length (time.Truncate's grid, the one the daemon's
// cycles end on). Every surface counts a window [from, to) by the same
// rule: the steps that start in it. OnGrid puts a window on that grid, so
// that `gpuwatch analyze`, the daemon, the reports and the job view see the
// same steps whatever the window's alignment; a step partly before from is
// not counted, a step partly after to is counted whole.

// OnGrid is the window [from, to) on the step grid: from the first step
// that starts at or after from, to the end of the last step that starts
// before to. The result is empty (start == end) when no step starts in
// the window.
func OnGrid(from, to time.Time, step time.Duration) (time.Time, time.Time) {
	start, end := ceilStep(from, step), ceilStep(to, step)
	if end.Before(start) {
		end = start
	}
	return start, end
}

// Complete is the end of the last step that is over at now: a window that
// runs into the step in progress ends there, since that step's samples
// are not all in and the daemon has not judged it yet.
func Complete(to, now time.Time, step time.Duration) time.Time {
	if last := now.Truncate(step); to.After(last) {
		return last
	}
	return to
}

func ceilStep(t time.Time, step time.Duration) time.Time {
	f := t.Truncate(step)
	if f.Before(t) {
		f = f.Add(step)
	}
	return f
}

// FindingSource is the part of the records that holds findings.
type FindingSource interface {
	FindingsBetween(ctx context.Context, from, to time.Time) ([]finding.Finding, error)
}

// Findings reads the findings of the window [from, to) (on the grid): of
// each, the version recorded by the newest cycle that judged a step of the
// window. A cycle records its findings at the end of the last step it
// read, so the window's cycles are those in (from, to]: the one at from
// judged the step before the window, the one at to its last step.
func Findings(ctx context.Context, r FindingSource, from, to time.Time) ([]finding.Finding, error) {
	return r.FindingsBetween(ctx, from.Add(time.Millisecond), to.Add(time.Millisecond))
}
