package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sharedPatternsScenario: on sh-01, GPU 0 is lu-shared's (light use all
// along) and time-sliced with three more pods in the series, GPU 1 is
// lu-sol's alike, alone; pg-shared holds GPUs 2 and 3 and leaves 3 idle,
// which is time-sliced with three more pods, pg-sol holds 4 and 5 alike,
// alone. Everything runs 3 h from the start.
const sharedPatternsScenario = `
name: shared-patterns
fleet:
  - {hostname: sh-01, model: H100-SXM5-80GB, gpus: 6}
workloads:
  - {id: lu-shared, scheduler: kubernetes, namespace: svc, container: main, user: ann, team: ds, kind: service, node: sh-01, gpus: [0], start: 0s, duration: 3h, behaviour: low_util}
  - {id: lu-sol, scheduler: kubernetes, namespace: svc, container: main, user: sol, team: ds, kind: service, node: sh-01, gpus: [1], start: 0s, duration: 3h, behaviour: low_util}
  - {id: pg-shared, scheduler: kubernetes, namespace: train, container: main, user: ann, team: ds, kind: batch, node: sh-01, gpus: [2, 3], start: 0s, duration: 3h, behaviour: partial_gpus, params: {idle_gpus: 1}}
  - {id: pg-sol, scheduler: kubernetes, namespace: train, container: main, user: sol, team: ds, kind: batch, node: sh-01, gpus: [4, 5], start: 0s, duration: 3h, behaviour: partial_gpus, params: {idle_gpus: 1}}
`

// TestSharedGPUHoursInEveryPattern: low_utilization, over_requested and
// overlong count a holder's share of a time-sliced GPU, as idle_session
// does (TestSharedGPUIdleHoursCountedOnce): the four light holders of one
// GPU waste its hours once between them, and are over the limit by its
// GPU once; a two-GPU job whose idle GPU is shared by four wastes a
// quarter of that GPU's hours, and is over the limit by 1.25 GPUs.
// Before, each holder was charged whole GPUs (4x the device's hours).
func TestSharedGPUHoursInEveryPattern(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 3 simulated hours per case")
	}
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	shared, cfg := sharedPatternsSetup(origin)
	for _, c := range []struct {
		name   string
		format simload.Format
	}{
		{"gpuwatch's series", simload.Format{}},
		{"stock dcgm-exporter", simload.Format{Stock: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkSharedPatterns(t, sharedFindings(t, sharedPatternsScenario, shared, origin, 200*time.Minute, c.format, cfg))
		})
	}
}

// sharedPatternsSetup is sharedPatternsScenario's time-slicing, its
// three more holders of GPUs 0 and 3 to the end at 3h, and the config it
// is judged under: every kind's run-time limit 1 h, so overlong shows.
func sharedPatternsSetup(origin time.Time) ([]simload.TimeSliced, config.Config) {
	to := origin.Add(3 * time.Hour)
	pods := func(ns, prefix string) []simload.Pod {
		var ps []simload.Pod
		for _, n := range []string{"b", "c", "d"} {
			ps = append(ps, simload.Pod{Name: prefix + n, Namespace: ns, Container: "main", To: to})
		}
		return ps
	}
	shared := []simload.TimeSliced{{Host: "sh-01", GPU: 0, Pods: pods("svc", "lu-")}, {Host: "sh-01", GPU: 3, Pods: pods("train", "pg-")}}
	cfg := config.Default()
	for _, k := range []string{schema.KindBatch, schema.KindInteractive, schema.KindService} {
		cfg.Patterns.Overlong.MaxRuntime[k] = config.Duration(time.Hour)
	}
	return shared, cfg
}

// checkSharedPatterns holds the findings of sharedPatternsScenario, under
// sharedPatternsSetup's config, to each holder's share of its time-sliced GPUs.
func checkSharedPatterns(t *testing.T, fs []finding.Finding) {
	t.Helper()
	by := map[schema.Pattern]map[string]*finding.Finding{}
	for i := range fs {
		f := &fs[i]
		if by[f.Pattern] == nil {
			by[f.Pattern] = map[string]*finding.Finding{}
		}
		by[f.Pattern][f.Job] = f
	}
	overLimit := func(f *finding.Finding) float64 { return f.Evidence["over_limit_gpu_hours"] }
	// The GPUs over the limit: its GPU-hours over it per hour over it
	// (a holder that joins a shared GPU is given a start of its own,
	// so the holders' hours past their limits differ a little).
	gpusOver := func(f *finding.Finding) float64 {
		return overLimit(f) / (f.Evidence["runtime_hours"] - f.Evidence["max_runtime_hours"])
	}
	wasted := func(f *finding.Finding) float64 { return f.WastedGPUHours }
	four := []string{"svc/lu-shared", "svc/lu-b", "svc/lu-c", "svc/lu-d"}
	checkQuarters(t, by[schema.LowUtilization], "svc/lu-sol", four, wasted)
	checkQuarters(t, by[schema.Overlong], "svc/lu-sol", four, gpusOver)
	// The two-GPU jobs: the idle GPU's hours by share.
	or := by[schema.OverRequested]
	sh, sol := or["train/pg-shared"], or["train/pg-sol"]
	if sh == nil || sol == nil {
		t.Fatalf("over_requested of the two-GPU jobs: shared %v, alone %v (%v)", sh, sol, heldBy(or))
	}
	if q := sh.WastedGPUHours / sol.WastedGPUHours; q < 0.22 || q > 0.28 {
		t.Errorf("over_requested: %.3f GPU-h with its idle GPU shared by four, %.3f alone (%.2f), want a quarter",
			sh.WastedGPUHours, sol.WastedGPUHours, q)
	}
	ol := by[schema.Overlong]
	sh, sol = ol["train/pg-shared"], ol["train/pg-sol"]
	if sh == nil || sol == nil {
		t.Fatalf("overlong of the two-GPU jobs: shared %v, alone %v", sh, sol)
	}
	if math.Abs(gpusOver(sh)-1.25) > 0.03 || math.Abs(gpusOver(sol)-2) > 0.03 {
		t.Errorf("overlong: %.3f GPUs over the limit with one of two GPUs shared by four, %.3f alone, want 1.25 and 2",
			gpusOver(sh), gpusOver(sol))
	}
}

// checkQuarters holds the findings of the four holders of a shared GPU
// to a quarter each of the one alone on a whole GPU (sole), summing to it.
func checkQuarters(t *testing.T, fs map[string]*finding.Finding, sole string, four []string, hours func(*finding.Finding) float64) {
	t.Helper()
	s := fs[sole]
	if s == nil || hours(s) <= 0 {
		t.Fatalf("no finding with hours of %s alone on a GPU: %v", sole, heldBy(fs))
	}
	sum := 0.0
	for _, job := range four {
		f := fs[job]
		if f == nil {
			t.Fatalf("no finding of %s on the shared GPU: %v", job, heldBy(fs))
		}
		if q := hours(f) / hours(s); q < 0.22 || q > 0.28 {
			t.Errorf("%s %s: %.3f GPU-h, %.2f of the whole GPU's %.3f, want a quarter", f.Pattern, job, hours(f), q, hours(s))
		}
		sum += hours(f)
	}
	if math.Abs(sum-hours(s)) > 0.03*hours(s) {
		t.Errorf("%s: the shared GPU's four holders %.3f GPU-h together, want the device's %.3f once", s.Pattern, sum, hours(s))
	}
}

func heldBy(fs map[string]*finding.Finding) []string {
	var out []string
	for k, f := range fs {
		out = append(out, fmt.Sprintf("%s=%.2f", k, f.WastedGPUHours))
	}
	return out
}

// sharedFindings replays scenario with the GPUs of shared time-sliced as
// dcgm-exporter publishes them, and analyzes it under cfg.
func sharedFindings(t *testing.T, scenario string, shared []simload.TimeSliced, origin time.Time, span time.Duration, f simload.Format, cfg config.Config) []finding.Finding {
	t.Helper()
	wraps := []simloadtest.Wrap{f.Sink}
	for _, s := range shared {
		wraps = append(wraps, s.Sink)
	}
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "shared.yaml", scenario),
		simload.Options{Seed: 7, Origin: origin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second}, wraps...)
	return analyzeSpan(t, db, cfg, origin, origin.Add(span)).Findings
}
