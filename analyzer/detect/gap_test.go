package detect

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// only returns the one finding of pattern p on job, failing otherwise.
func only(t *testing.T, fs []finding.Finding, job string, p schema.Pattern) finding.Finding {
	t.Helper()
	var got []finding.Finding
	for _, f := range fs {
		if f.Job == job && f.Pattern == p {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d %s findings on job %s, want 1: %+v", len(got), p, job, fs)
	}
	return got[0]
}

// A gap in a job's data pauses its runs' clocks and ends nothing: a
// CPU-only job is one cpu_only episode over its whole held time less the
// gap, and an hour idle around a gap of half an hour is one stuck episode
// of the known hour.
func TestGapPausesRuns(t *testing.T) {
	h := 12
	cases := []struct {
		name    string
		j       job
		p       schema.Pattern
		minutes float64 // the finding's known minutes, gaps left out
	}{
		// Steps 2 to 4h, 2 of them (10 minutes) without data.
		{"cpu only", job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{gap(idle(0), 2*h, 2*h+2)}}, schema.CPUOnly, float64((4*h - 4) * 5)},
		// Busy an hour, then 40 idle minutes, 30 without data, 30 idle.
		{"stuck", job{id: "2", start: 0, end: h + 20, gpus: []gpuFn{gap(phases(busy, h, idle(40000)), h+8, h+14)}}, schema.Stuck, 70},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := feed(t, config.Default(), 5*h, c.j)
			f := only(t, fs, c.j.id, c.p)
			if f.Evidence["episodes"] != 1 {
				t.Errorf("%v episodes, want 1 (the gap ended one)", f.Evidence["episodes"])
			}
			if f.Evidence["idle_minutes"] != c.minutes {
				t.Errorf("idle %v minutes, want %v", f.Evidence["idle_minutes"], c.minutes)
			}
			if want := round(c.minutes / 60); f.WastedGPUHours != want {
				t.Errorf("wasted %v GPU-hours, want %v (held time less the gap)", f.WastedGPUHours, want)
			}
		})
	}
}

// A window that starts mid-run counts only the run's known time inside
// it: the steps before still judge (the job was never used since it
// started, the session idle that long), but add no hours, and the finding
// starts at the window.
func TestFindingsClippedToWindow(t *testing.T) {
	h := 12
	window := t0.Add(3 * time.Hour)
	cases := []struct {
		name    string
		j       job
		p       schema.Pattern
		minutes float64 // known minutes inside the window
	}{
		// Held from step 2 to 6h, 10 minutes without data before the
		// window and 10 inside it: 3h in the window, less 10 minutes.
		{"cpu only", job{id: "1", start: 2, end: 6 * h, gpus: []gpuFn{gap(gap(idle(0), h, h+2), 4*h-2, 4*h)}}, schema.CPUOnly, 170},
		// Idle from 1h: 30 idle minutes before the window would not
		// reach idle_session's threshold on their own.
		{"idle session", job{id: "2", kind: schema.KindInteractive, start: 0, end: 4 * h, gpus: []gpuFn{phases(busy, 5*h/2, idle(2000))}}, schema.IdleSession, 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := NewState()
			st.Window = window
			fs, _ := feedState(t, config.Default(), st, 6*h, c.j)
			f := only(t, fs, c.j.id, c.p)
			if !f.Start.Equal(window) {
				t.Errorf("starts %s, want the window's start %s: %+v", f.Start, window, f)
			}
			if want := round(c.minutes / 60); f.WastedGPUHours != want {
				t.Errorf("wasted %v GPU-hours, want %v (the window's part)", f.WastedGPUHours, want)
			}
			whole, _ := feed(t, config.Default(), 6*h, c.j)
			if w := only(t, whole, c.j.id, c.p); w.Evidence["idle_minutes"] != f.Evidence["idle_minutes"] {
				t.Errorf("idle %v minutes, want the whole run's %v: the warm-up informs the state", f.Evidence["idle_minutes"], w.Evidence["idle_minutes"])
			}
		})
	}
}

// An episode over before the window is the warm-up's: no finding.
func TestEpisodeBeforeWindowDropped(t *testing.T) {
	h := 12
	st := NewState()
	st.Window = t0.Add(4 * time.Hour)
	// Busy an hour, then idle with memory held until it ends at 3h.
	j := job{id: "3", start: 0, end: 3 * h, gpus: []gpuFn{phases(busy, h, idle(40000))}}
	fs, _ := feedState(t, config.Default(), st, 6*h, j)
	for _, f := range fs {
		if f.Pattern == schema.Stuck {
			t.Fatalf("stuck over at 3h listed for a window from 4h: %+v", f)
		}
	}
	if whole, _ := feed(t, config.Default(), 6*h, j); len(whole) == 0 {
		t.Fatal("no finding without the window: the case proves nothing")
	}
}

// An open finding whose allocation has no data at the latest step is
// carried, marked unknown, so the escalation holds its episode and acts on
// nothing until the data is back; with the data back the mark is gone.
func TestOpenFindingInGapMarkedUnknown(t *testing.T) {
	h := 12
	for _, c := range []struct {
		name    string
		gapTo   int
		unknown float64
	}{{"data missing at the last step", 6 * h, 1}, {"data back", 4*h + 6, 0}} {
		t.Run(c.name, func(t *testing.T) {
			j := job{id: "3", start: 2, end: 6 * h, gpus: []gpuFn{gap(idle(0), 4*h, c.gapTo)}}
			fs, _ := feed(t, config.Default(), 5*h, j)
			f := only(t, fs, j.id, schema.CPUOnly)
			if got := f.Evidence[finding.EvidenceUnknown]; got != c.unknown {
				t.Errorf("evidence %s = %v, want %v", finding.EvidenceUnknown, got, c.unknown)
			}
		})
	}
}
