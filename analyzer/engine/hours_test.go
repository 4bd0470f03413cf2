package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// trueHours is the GPU-hours a labelled allocation wasted by construction,
// read from its behaviour's parameters, within [0, span). ok is false for
// behaviours whose waste is a matter of degree (low utilization).
func trueHours(sc *sim.Scenario, e sim.Expectation, span time.Duration) (float64, bool) {
	var w *sim.Workload
	for i := range sc.Workloads {
		x := &sc.Workloads[i]
		if x.Node == e.Hostname && (x.ID == e.Job || x.Namespace+"/"+x.ID == e.Job) {
			w = x
		}
	}
	if w == nil {
		return 0, false
	}
	n := float64(len(w.GPUs))
	end := min(w.End, span)
	// The analysis sees nothing before the window's start.
	h := func(from, to time.Duration) float64 { return math.Max(0, (to - max(from, 0)).Hours()) }
	switch w.Behaviour {
	case sim.CPUOnly:
		return n * h(w.Start, end), true
	case sim.HungCollective, sim.StuckIdle, sim.IdleNotebook:
		return n * h(w.Start+w.Params.Active, end), true
	case sim.StartupDelay:
		return n * w.Params.Delay.Hours(), true
	case sim.PartialGPUs:
		return float64(w.Params.IdleGPUs) * h(w.Start, end), true
	case sim.Overlong:
		return n * h(w.Start+48*time.Hour, end), true
	case sim.Orphan:
		return n * h(w.End, min(w.End+w.Params.OrphanFor, span)), true
	}
	return 0, false
}

// checkHours compares found and true GPU-hours on the true positives, per
// pattern: the sum over a pattern's cases must be within 15 %. For overlong
// the figure is the GPU-hours over the limit.
func checkHours(t *testing.T, c corpus, exps []sim.Expectation, fs []finding.Finding, skip func(sim.Expectation) bool) {
	t.Helper()
	found := map[string]float64{}
	for _, f := range fs {
		h := f.WastedGPUHours
		if f.Pattern == schema.Overlong {
			h = f.Evidence["over_limit_gpu_hours"] // over the limit is not waste
		}
		found[f.Hostname+"|"+f.Job+"|"+string(f.Pattern)] += h
	}
	type sum struct{ found, truth float64 }
	sums := map[schema.Pattern]*sum{}
	var b strings.Builder
	for _, e := range exps {
		if skip != nil && skip(e) || len(e.Patterns) != 1 {
			continue
		}
		p := schema.Pattern(e.Patterns[0])
		got, ok := found[e.Hostname+"|"+e.Job+"|"+string(p)]
		truth, known := trueHours(c.sc, e, c.span)
		if !ok || !known {
			continue
		}
		if sums[p] == nil {
			sums[p] = &sum{}
		}
		sums[p].found += got
		sums[p].truth += truth
		if math.Abs(got-truth) > 0.15*truth {
			fmt.Fprintf(&b, "  %s %s|%s: found %.2f GPU-h, true %.2f\n", p, e.Hostname, e.Job, got, truth)
		}
	}
	fmt.Fprintf(&b, "%-18s %10s %10s %7s\n", "pattern", "found_h", "true_h", "error")
	for _, p := range schema.Patterns {
		s := sums[p]
		if s == nil {
			continue
		}
		dev := (s.found - s.truth) / s.truth
		fmt.Fprintf(&b, "%-18s %10.2f %10.2f %6.1f%%\n", p, s.found, s.truth, 100*dev)
		if math.Abs(dev) > 0.15 {
			t.Errorf("%s: %.2f GPU-hours found, %.2f true (%.1f%%)", p, s.found, s.truth, 100*dev)
		}
	}
	t.Log("GPU-hours on the labelled cases:\n" + b.String())
}
