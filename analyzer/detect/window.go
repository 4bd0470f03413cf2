package detect

import (
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// evidenceOverLimit is accounting.EvidenceOverLimit (that package reads
// findings, so this one cannot import it): over-the-limit GPU-hours, which
// the accounting clips by a finding's span as it does its waste.
const evidenceOverLimit = "over_limit_gpu_hours"

// clip keeps a verdict made at t to the counted window that starts at
// window (State.Window; zero counts everything): the steps before the
// window informed the judgement, but their GPU-hours are the warm-up's. A
// run's hours are scaled to its clock inside the window (gaps left out), a
// cumulative verdict's to its known hours inside it, a one-off span's to
// its wall time inside it; the start shown moves to the window's
// (an episode over before it is left out by State.Findings). The
// GPU-hours the accounting reads from evidence (over the limit, degraded)
// are scaled by the wall time inside, as the accounting scales by a span.
func clip(v *verdict, a *Alloc, cumulative bool, t, window time.Time) {
	if window.IsZero() || !v.from.Before(window) {
		return
	}
	end := t
	if !v.to.IsZero() {
		end = v.to
	}
	var full, in float64
	switch {
	case cumulative:
		full, in = a.KnownHours, a.KnownHours-a.KnownLeadHours
	case !v.to.IsZero():
		full, in = end.Sub(v.from).Hours(), end.Sub(window).Hours()
	default:
		full, in = a.clock(v.from, end).Hours(), a.clock(window, end).Hours()
	}
	v.wasted *= fraction(in, full)
	wall := fraction(end.Sub(window).Hours(), end.Sub(v.from).Hours())
	for _, k := range []string{evidenceOverLimit, schema.EvidenceDegraded} {
		if x, ok := v.evidence[k]; ok {
			v.evidence[k] = x * wall
		}
	}
	// Also for a verdict made before the window (wasted then 0): an
	// episode that goes on into the window keeps its first start.
	v.from = window
}

// fraction is part/whole within [0, 1]; zero when whole is none.
func fraction(part, whole float64) float64 {
	if whole <= 0 || part <= 0 {
		return 0
	}
	return min(1, part/whole)
}
