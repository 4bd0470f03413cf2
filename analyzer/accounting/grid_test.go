package accounting

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestOnGrid(t *testing.T) {
	step := 5 * time.Minute
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	for _, tc := range []struct {
		name             string
		from, to         time.Duration
		wantFrom, wantTo time.Duration
		wantEmpty        bool
	}{
		{"on the grid", 0, time.Hour, 0, time.Hour, false},
		{"from inside a step: its next step", 100 * time.Second, time.Hour, step, time.Hour, false},
		{"from a millisecond past the grid", time.Millisecond, time.Hour, step, time.Hour, false},
		{"to inside a step: that step whole", 0, time.Hour + time.Second, 0, time.Hour + step, false},
		{"no step starts in it", 100 * time.Second, 200 * time.Second, step, step, true},
		{"two minutes across a grid point: one step", 4 * time.Minute, 6 * time.Minute, step, 2 * step, false},
	} {
		f, to := OnGrid(at(tc.from), at(tc.to), step)
		if !f.Equal(at(tc.wantFrom)) || !to.Equal(at(tc.wantTo)) || f.Equal(to) != tc.wantEmpty {
			t.Errorf("%s: OnGrid(+%s, +%s) = +%s, +%s; want +%s, +%s", tc.name, tc.from, tc.to, f.Sub(t0), to.Sub(t0), tc.wantFrom, tc.wantTo)
		}
	}
	// The daemon's cycles end on the same grid: now.Truncate(step).
	now := t0.Add(17*time.Minute + 3*time.Second)
	if f, _ := OnGrid(now.Truncate(step), now, step); !f.Equal(t0.Add(15 * time.Minute)) {
		t.Errorf("a cycle's step end %s is not on the grid", f)
	}
}

func TestComplete(t *testing.T) {
	step := 5 * time.Minute
	now := t0.Add(time.Hour + 2*time.Minute)
	for _, tc := range []struct {
		to, want time.Duration
	}{
		{time.Hour + 2*time.Minute, time.Hour}, // now: the step in progress is left out
		{2 * time.Hour, time.Hour},             // the future too
		{time.Hour, time.Hour},                 // the last complete step's end
		{30 * time.Minute, 30 * time.Minute},   // the past stays
		{31 * time.Minute, 31 * time.Minute},   // off the grid, but complete
	} {
		if got := Complete(t0.Add(tc.to), now, step); !got.Equal(t0.Add(tc.want)) {
			t.Errorf("Complete(+%s) at +1h2m = +%s, want +%s", tc.to, got.Sub(t0), tc.want)
		}
	}
}

// A window's findings are what its own cycles recorded: the cycle at its
// end (which judged its last step) counts, the one at its start (which
// judged the step before it) does not.
func TestFindingsAreTheWindowsCycles(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	step := 5 * time.Minute
	from, to := t0, t0.Add(2*step)
	idle := func(end time.Time, job string) finding.Finding {
		return finding.Finding{Pattern: schema.CPUOnly, Hostname: "h", Job: job, GPUs: []string{"0"},
			Start: t0.Add(-time.Hour), End: end, WastedGPUHours: end.Sub(t0.Add(-time.Hour)).Hours()}
	}
	for _, c := range []struct {
		cycle time.Time
		fs    []finding.Finding
	}{
		{from, []finding.Finding{idle(from, "1"), idle(from, "before")}},
		{from.Add(step), []finding.Finding{idle(from.Add(step), "1")}},
		{to, []finding.Finding{idle(to, "1"), idle(to, "last-step")}},
		{to.Add(step), []finding.Finding{idle(to.Add(step), "1"), idle(to.Add(step), "after")}},
	} {
		if err := st.SaveFindings(ctx, c.cycle, c.fs); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := Findings(ctx, st, from, to)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Time{}
	for _, f := range fs {
		got[f.Job] = f.End
	}
	if len(got) != 2 || !got["1"].Equal(to) || !got["last-step"].Equal(to) {
		t.Errorf("findings of [+0, +10m): %v; want 1 and last-step, as the cycle at +10m recorded them", got)
	}
}
