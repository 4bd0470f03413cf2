package report

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

const (
	a100 = "NVIDIA A100-SXM4-80GB"
	h100 = "NVIDIA H100 80GB HBM3"
)

var w47 = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC) // Monday of 2026-W47

func hourly(start time.Time, n int, host, job, user, team, model string, gpus int, activeFrac float64) []store.Usage {
	var out []store.Usage
	for i := 0; i < n; i++ {
		s := start.Add(time.Duration(i) * time.Hour)
		out = append(out, store.Usage{Start: s, End: s.Add(time.Hour), Hostname: host, Job: job, User: user, Team: team,
			Kind: "batch", Model: model, GPUs: gpus, AllocatedGPUHours: float64(gpus), ActiveGPUHours: float64(gpus) * activeFrac})
	}
	return out
}

// handStore holds a small hand-computed week (numbers in the test).
func handStore(t *testing.T) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var us []store.Usage
	us = append(us, hourly(w47, 10, "h1", "1", "alice", "ml", a100, 2, 0.5)...)                    // 20 alloc, 10 active
	us = append(us, hourly(w47.Add(24*time.Hour), 5, "h2", "2", "bob", "ml", h100, 1, 1)...)       // 5, 5
	us = append(us, hourly(w47.Add(48*time.Hour), 2, "h3", "3", "carol", "cv", a100, 4, 0)...)     // 8, 0
	us = append(us, hourly(w47.Add(-7*24*time.Hour), 10, "h1", "0", "alice", "ml", a100, 1, 1)...) // W46: 10, 10
	us = append(us, hourly(w47.Add(7*24*time.Hour), 3, "h1", "9", "alice", "ml", a100, 1, 1)...)   // W48: not counted
	us = append(us, hourly(w47, 12, "h4", "5", "bob", "ml", h100, 1, 1)...)                        // busy past its limit: 12, 12
	if err := st.AddUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	low := finding.Finding{Pattern: schema.LowUtilization, Job: "1", User: "alice", Team: "ml", Hostname: "h1", ModelName: a100,
		GPUs: []string{"g0", "g1"}, Start: w47, End: w47.Add(10 * time.Hour), WastedGPUHours: 3,
		Evidence: map[string]float64{"mean_util_percent": 12, "fb_max_mib": 7000}}
	if err := st.SaveFindings(ctx, w47.Add(5*time.Hour), []finding.Finding{low}); err != nil {
		t.Fatal(err)
	}
	low.WastedGPUHours = 9 // a later cycle supersedes the earlier one
	cpu := finding.Finding{Pattern: schema.CPUOnly, Job: "3", User: "carol", Team: "cv", Hostname: "h3", ModelName: a100,
		GPUs: []string{"a", "b", "c", "d"}, Start: w47.Add(48 * time.Hour), End: w47.Add(50 * time.Hour), WastedGPUHours: 8}
	// Overlong from Sunday noon of W46 to Monday noon of W47, busy: half of
	// its 24 GPU-hours over the limit fall in W47, as over-limit, not waste.
	long := finding.Finding{Pattern: schema.Overlong, Job: "5", User: "bob", Team: "ml", Hostname: "h4", GPUs: []string{"x"},
		Start: w47.Add(-12 * time.Hour), End: w47.Add(12 * time.Hour), Evidence: map[string]float64{"over_limit_gpu_hours": 24}}
	if err := st.AddUsage(ctx, []store.Usage{{Start: w47.Add(-14 * 24 * time.Hour), End: w47.Add(-14*24*time.Hour + time.Hour),
		Hostname: "h4", Job: "5", User: "bob", Team: "ml", Model: h100, GPUs: 1, AllocatedGPUHours: 0}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at time.Time
		f  finding.Finding
	}{{w47.Add(10 * time.Hour), low}, {w47.Add(50 * time.Hour), cpu}, {w47.Add(12 * time.Hour), long}} {
		if err := st.SaveFindings(ctx, c.at, []finding.Finding{c.f}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func handConfig(t *testing.T) *Config {
	t.Helper()
	c, err := ParseConfig("test", []byte(`timezone: UTC
currency: EUR
prices: {A100: 2, H100: 4}
grafana: {url: "https://grafana.example.org/"}
trend_weeks: 2
teams:
  ml: {recipients: [ml@example.org]}
  cv: {recipients: [cv@example.org]}
  idle: {recipients: [idle@example.org]}
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestBuildTeam(t *testing.T) {
	st := handStore(t)
	b := &Builder{Data: st, Config: handConfig(t), Now: func() time.Time { return w47.Add(8 * 24 * time.Hour) }}
	p := WeekOf(w47, time.UTC)
	r, err := b.Build(context.Background(), p, "ml")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"allocated 20 + 5 + 12", r.Totals.AllocatedGPUHours, 37},
		// Job 1's low utilization takes 9 of its 20 GPU-hours: used is at
		// most the 11 left, and its 10 active fit.
		{"used 10 + 5 + 12", r.Totals.ActiveGPUHours, 27},
		{"idle", r.Totals.IdleGPUHours, 10},
		{"wasted (9 low-util; over the limit is not waste)", r.Totals.WastedGPUHours, 9},
		{"over the limit: half of 24 in the week", r.Totals.OverLimitGPUHours, 12},
		{"wasted share", r.Totals.WastedShare, 9.0 / 37},
		{"cost 20×2 + 5×4 + 12×4", r.Totals.Cost, 108},
		{"wasted cost 9×2", r.Totals.WastedCost, 18},
		{"fleet share 37/45", r.FleetShare, 37.0 / 45},
		{"fleet waste share 9/17", r.FleetWasteShare, 9.0 / 17},
		{"monday allocated", r.Daily[0].AllocatedGPUHours, 32},
		{"monday wasted", r.Daily[0].WastedGPUHours, 9},
		{"tuesday active", r.Daily[1].ActiveGPUHours, 5},
		{"sunday", r.Daily[6].AllocatedGPUHours, 0},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Totals.Jobs != 3 || r.Totals.Users != 2 {
		t.Errorf("jobs %d users %d, want 3 2", r.Totals.Jobs, r.Totals.Users)
	}
	if len(r.ByPattern) != 1 || r.ByPattern[0].Pattern != schema.LowUtilization || !near(r.ByPattern[0].Share, 1) {
		t.Errorf("by pattern = %+v (over the limit is no waste pattern)", r.ByPattern)
	}
	if len(r.TopJobs) != 1 || r.TopJobs[0].Job != "1" || r.TopJobs[0].GPUs != 2 {
		t.Errorf("top jobs = %+v", r.TopJobs)
	}
	if !strings.HasPrefix(r.TopJobs[0].Link, "https://grafana.example.org/d/gpuwatch-job/gpuwatch-job?") ||
		!strings.Contains(r.TopJobs[0].Link, "var-job=1") || !strings.Contains(r.TopJobs[0].Link, "var-hostname=h1") ||
		!strings.Contains(r.TopJobs[0].Link, "from=1794787200000") {
		t.Errorf("job link %q", r.TopJobs[0].Link)
	}
	if len(r.TopUsers) != 2 || r.TopUsers[0].User != "alice" || !near(r.TopUsers[0].AllocatedGPUHours, 20) || !near(r.TopUsers[1].AllocatedGPUHours, 17) {
		t.Errorf("top users = %+v", r.TopUsers)
	}
	if len(r.Advice) != 1 || !strings.Contains(r.Advice[0].Advice, "MIG 1g.10gb") {
		t.Errorf("advice = %+v", r.Advice)
	}
	if len(r.Trend) != 3 || r.Trend[0].Label != "2026-W45" || r.Trend[1].Label != "2026-W46" ||
		!near(r.Trend[1].AllocatedGPUHours, 10) || r.Trend[2].Label != "2026-W47" || !near(r.Trend[2].WastedGPUHours, 9) {
		t.Errorf("trend = %+v", r.Trend)
	}
	if r.Teams != nil || r.Actions != nil {
		t.Errorf("team report carries fleet sections")
	}
}

// The fleet report lists the settled steps the audit log recorded in the
// week, written through the audit log itself: not the intents, not steps of
// other weeks.
func TestBuildFleetAndActions(t *testing.T) {
	ctx := context.Background()
	p := WeekOf(w47, time.UTC)
	inWeek, before := time.UnixMilli(1795330800000).UTC(), time.UnixMilli(1700000000000).UTC()
	type step struct {
		at    time.Time
		rec   audit.Record
		state audit.State // "" leaves the step intended
	}
	cases := []struct {
		name        string
		steps       []step
		wantActions int
		wantNote    string
	}{
		{name: "empty audit log", wantNote: "No actions were taken"},
		{name: "a dry-run this week", steps: []step{
			{inWeek, audit.Record{Key: "a", Step: "warn", Pattern: "cpu_only", Team: "cv", Job: "3", DryRun: true}, audit.DryRun},
			{before, audit.Record{Key: "b", Step: "reclaim", Pattern: "idle_session", Team: "ml", Job: "7"}, audit.Done},
			{inWeek, audit.Record{Key: "c", Step: "reclaim", Pattern: "stuck", Team: "ml", Job: "8"}, ""},
		}, wantActions: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := handStore(t)
			lg, err := audit.Open(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.steps {
				if _, _, err := lg.Intend(ctx, s.rec, s.at); err != nil {
					t.Fatal(err)
				}
				if s.state != "" {
					if err := lg.Finish(ctx, s.rec.Key, s.state, "", s.at); err != nil {
						t.Fatal(err)
					}
				}
			}
			b := NewBuilder(st, handConfig(t))
			r, err := b.Build(ctx, p, "")
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Totals.AllocatedGPUHours, 45) || !near(r.Totals.WastedGPUHours, 17) || r.FleetShare != 1 {
				t.Errorf("fleet totals = %+v share %v", r.Totals, r.FleetShare)
			}
			var names []string
			for _, tr := range r.Teams {
				names = append(names, tr.Team)
			}
			if strings.Join(names, ",") != "ml,cv,idle" {
				t.Errorf("teams = %v, want ml,cv,idle (by waste, configured idle team last)", names)
			}
			if len(r.Actions) != tc.wantActions || !strings.Contains(r.ActionsNote, tc.wantNote) {
				t.Errorf("actions = %+v note %q", r.Actions, r.ActionsNote)
			}
			if tc.wantActions > 0 && (r.Actions[0].Action != "warn" || !r.Actions[0].DryRun || r.Actions[0].Team != "cv" ||
				r.Actions[0].Outcome != string(audit.DryRun)) {
				t.Errorf("action = %+v", r.Actions[0])
			}
		})
	}
}

// TestTrendPathsAgree: summing in SQL (the store's UsageTotals) gives the
// same trend as summing the intervals in Go (the store behind a Data that
// hides UsageTotals).
func TestTrendPathsAgree(t *testing.T) {
	st := handStore(t)
	cfg := handConfig(t)
	cfg.TrendWeeks = 3
	p := WeekOf(w47.AddDate(0, 0, 7), time.UTC) // W48: trend W45..W47
	var got [2][]TrendRow
	for i, d := range []Data{struct{ Data }{st}, st} {
		rs, fleet, err := (&Builder{Data: d, Config: cfg}).BuildAll(context.Background(), p, []string{"ml", "cv"}, true)
		if err != nil {
			t.Fatal(err)
		}
		got[i] = append(append(append([]TrendRow{}, rs["ml"].Trend...), rs["cv"].Trend...), fleet.Trend...)
	}
	if len(got[0]) != 12 {
		t.Fatalf("%d trend rows", len(got[0]))
	}
	for i := range got[0] {
		if got[0][i] != got[1][i] {
			t.Errorf("row %d: Go %+v, SQL %+v", i, got[0][i], got[1][i])
		}
	}
	if !near(got[1][2].AllocatedGPUHours, 37) || !near(got[1][1].AllocatedGPUHours, 10) || !near(got[1][6].AllocatedGPUHours, 8) {
		t.Errorf("trend = %+v", got[1])
	}
}

// TestNoEmptyNoTeamRow: an orphaned process (no live job, so no team) adds
// to the fleet's orphan total, not a "(no team)" row of zeros in the team
// table, as the demo's fleet report had; usage without a team still gets
// its row.
func TestNoEmptyNoTeamRow(t *testing.T) {
	ctx := context.Background()
	p := WeekOf(w47, time.UTC)
	rowOf := func(r *Report) *TeamRow {
		for i := range r.Teams {
			if r.Teams[i].Team == noTeam {
				return &r.Teams[i]
			}
		}
		return nil
	}
	st := handStore(t)
	orphan := finding.Finding{Pattern: schema.OrphanProcess, Job: "", Hostname: "h1", GPUs: []string{"g7"},
		Start: w47.Add(time.Hour), End: w47.Add(3 * time.Hour), WastedGPUHours: 2}
	if err := st.SaveFindings(ctx, w47.Add(3*time.Hour), []finding.Finding{orphan}); err != nil {
		t.Fatal(err)
	}
	r, err := NewBuilder(st, handConfig(t)).Build(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Totals.OrphanGPUHours, 2) {
		t.Errorf("orphaned %.1f GPU-hours, want 2", r.Totals.OrphanGPUHours)
	}
	if row := rowOf(r); row != nil {
		t.Errorf("a %q row of orphans alone: %+v", noTeam, *row)
	}
	if err := st.AddUsage(ctx, hourly(w47, 4, "h5", "77", "zoe", "", a100, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if r, err = NewBuilder(st, handConfig(t)).Build(ctx, p, ""); err != nil {
		t.Fatal(err)
	}
	if row := rowOf(r); row == nil || !near(row.AllocatedGPUHours, 4) {
		t.Errorf("usage without a team: row %+v, want 4 GPU-hours allocated", row)
	}
}
