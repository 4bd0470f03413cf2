package accounting

import (
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

var t0 = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func steps(host, job string, from time.Time, n, gpus int, active float64) []store.Usage {
	var out []store.Usage
	for i := 0; i < n; i++ {
		s := from.Add(time.Duration(i) * time.Hour)
		out = append(out, store.Usage{Start: s, End: s.Add(time.Hour), Hostname: host, Job: job, GPUs: gpus,
			AllocatedGPUHours: float64(gpus), ActiveGPUHours: float64(gpus) * active})
	}
	return out
}

func TestClip(t *testing.T) {
	from, to := t0, t0.Add(7*24*time.Hour)
	for _, tc := range []struct {
		name       string
		start, end time.Time
		want       float64
	}{
		{"inside", from.Add(time.Hour), from.Add(3 * time.Hour), 1},
		{"half before", from.Add(-time.Hour), from.Add(time.Hour), 0.5},
		{"after", to, to.Add(time.Hour), 0},
		{"instant inside", from.Add(time.Hour), from.Add(time.Hour), 1},
		{"instant at end", to, to, 0},
	} {
		if got := Clip(tc.start, tc.end, from, to); !near(got, tc.want) {
			t.Errorf("%s: Clip = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestBook holds each definition on a small window.
func TestBook(t *testing.T) {
	from, to := t0, t0.Add(24*time.Hour)
	var us []store.Usage
	us = append(us, steps("h", "light", from, 10, 1, 1)...)                   // 10 allocated, all active
	us = append(us, steps("h", "idle", from, 4, 2, 0)...)                     // 8 allocated, none active
	us = append(us, steps("h", "long", from, 6, 1, 1)...)                     // 6, busy past its limit
	us = append(us, steps("h", "before", from.Add(-5*time.Hour), 5, 1, 1)...) // outside
	fs := []finding.Finding{
		// A lightly used GPU: 9 of its 10 active hours are waste.
		{Pattern: schema.LowUtilization, Hostname: "h", Job: "light", Start: from, End: from.Add(10 * time.Hour), WastedGPUHours: 9},
		// Two findings over the same idle hours: together more than allocated.
		{Pattern: schema.CPUOnly, Hostname: "h", Job: "idle", Start: from, End: from.Add(4 * time.Hour), WastedGPUHours: 8},
		{Pattern: schema.StartupOverhead, Hostname: "h", Job: "idle", Start: from, End: from.Add(4 * time.Hour), WastedGPUHours: 4},
		// Over the limit for the last 4 of its 6 hours.
		{Pattern: schema.Overlong, Hostname: "h", Job: "long", Start: from.Add(2 * time.Hour), End: from.Add(6 * time.Hour),
			Evidence: map[string]float64{EvidenceOverLimit: 4}},
		// An orphan: no allocation holds it; half its span is in the window.
		{Pattern: schema.OrphanProcess, Hostname: "h", Job: "gone", Start: to.Add(-time.Hour), End: to.Add(time.Hour), WastedGPUHours: 2},
	}
	b := Build(from, to, us, fs)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"allocated 10+8+6", b.Allocated, 24},
		{"wasted 9 + min(12, 8)", b.Wasted, 17},
		{"used: 1 of light, 0 of idle, 6 of long", b.Used, 7},
		{"over the limit", b.OverLimit, 4},
		{"orphan, half in the window", b.Orphan, 1},
		{"light's active counted as used", b.UsedShare("h", "light"), 0.1},
		{"unjudged", b.Unjudged(), 0},
	} {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if b.Used+b.Wasted > b.Allocated+1e-9 {
		t.Errorf("used %v + wasted %v > allocated %v", b.Used, b.Wasted, b.Allocated)
	}
	// The overlapping findings are scaled alike, so the entries sum to the total.
	var sum float64
	by := map[schema.Pattern]float64{}
	for _, e := range b.Entries {
		sum += e.Wasted
		by[e.Finding.Pattern] += e.Wasted
	}
	if !near(sum, b.Wasted) || !near(by[schema.CPUOnly], 8*8.0/12) || !near(by[schema.StartupOverhead], 4*8.0/12) {
		t.Errorf("entries sum to %v (by pattern %v), want %v", sum, by, b.Wasted)
	}
}

// A finding whose allocation held nothing in the window wastes nothing there.
func TestFindingWithoutAllocation(t *testing.T) {
	from, to := t0, t0.Add(24*time.Hour)
	b := Build(from, to, nil, []finding.Finding{{Pattern: schema.Stuck, Hostname: "h", Job: "j", Start: from, End: to, WastedGPUHours: 5,
		Evidence: map[string]float64{}}})
	if b.Wasted != 0 || b.Allocated != 0 {
		t.Errorf("book %+v", b.Totals)
	}
}

// A long-running ledger settles allocations that ended: the totals stay
// those of a ledger that kept everything, and closing twice changes nothing.
func TestSettle(t *testing.T) {
	from, to := t0, t0.Add(7*24*time.Hour)
	var us []store.Usage
	us = append(us, steps("h", "early", from, 4, 2, 0.5)...)
	us = append(us, steps("h", "late", from.Add(48*time.Hour), 4, 1, 1)...)
	fs := []schemaFinding{
		{schema.Stuck, "early", from.Add(2 * time.Hour), from.Add(4 * time.Hour), 4, 0},
		{schema.Overlong, "late", from.Add(50 * time.Hour), from.Add(52 * time.Hour), 0, 2},
		{schema.OrphanProcess, "gone", from.Add(5 * time.Hour), from.Add(6 * time.Hour), 1, 0},
	}
	whole := NewLedger(from, to)
	settled := NewLedger(from, to)
	for i := range us {
		whole.AddUsage(&us[i])
		settled.AddUsage(&us[i])
	}
	for _, x := range fs {
		f := x.finding()
		whole.AddFinding(&f)
		settled.AddFinding(&f)
	}
	settled.Settle(from.Add(24 * time.Hour)) // "early" and the orphan are done
	if len(settled.allocs) != 1 || len(settled.findings) != 1 {
		t.Errorf("settled ledger holds %d allocations and %d findings, want the live 1 and 1", len(settled.allocs), len(settled.findings))
	}
	a, b := whole.Close().Totals, settled.Close().Totals
	if !near(a.Allocated, b.Allocated) || !near(a.Used, b.Used) || !near(a.Wasted, b.Wasted) || !near(a.OverLimit, b.OverLimit) || !near(a.Orphan, b.Orphan) {
		t.Errorf("settled %+v, whole %+v", b, a)
	}
	if c := settled.Close().Totals; c != b || !near(b.Wasted, 4) || !near(b.OverLimit, 2) || !near(b.Orphan, 1) {
		t.Errorf("closing again: %+v, first %+v", c, b)
	}
}

type schemaFinding struct {
	p                 schema.Pattern
	job               string
	start, end        time.Time
	wasted, overLimit float64
}

func (x schemaFinding) finding() finding.Finding {
	return finding.Finding{Pattern: x.p, Hostname: "h", Job: x.job, Start: x.start, End: x.end, WastedGPUHours: x.wasted,
		Evidence: map[string]float64{EvidenceOverLimit: x.overLimit}}
}

// TestDegradedIsItsOwnTotal: a straggler's degraded GPU-hours are counted
// apart: never waste, never taken out of used, at most allocated.
func TestDegradedIsItsOwnTotal(t *testing.T) {
	from, to := t0, t0.Add(24*time.Hour)
	us := steps("h", "ddp", from, 4, 4, 1) // 16 allocated, all used
	fs := []finding.Finding{
		{Pattern: schema.Straggler, Hostname: "h", Job: "ddp", Start: from, End: from.Add(4 * time.Hour),
			Evidence: map[string]float64{schema.EvidenceDegraded: 6}},
		{Pattern: schema.Throttled, Hostname: "h", Job: "other", Start: from, End: from.Add(time.Hour),
			Evidence: map[string]float64{schema.EvidenceDegraded: 3}}, // no usage: nothing allocated to degrade
	}
	b := Build(from, to, us, fs)
	if !near(b.Degraded, 6) || b.Wasted != 0 || !near(b.Used, 16) || !near(b.Allocated, 16) {
		t.Errorf("totals %+v: want 6 degraded, 0 wasted, 16 used of 16", b.Totals)
	}
	if a := b.Allocations[Key("h", "ddp")]; a == nil || !near(a.Degraded, 6) {
		t.Errorf("allocation: %+v", a)
	}
	l := NewLedger(from, to)
	for i := range us {
		l.AddUsage(&us[i])
	}
	l.AddFinding(&fs[0])
	l.Settle(to)
	if got := l.Close().Degraded; !near(got, 6) {
		t.Errorf("settled degraded %.2f, want 6", got)
	}
}
