package engine

import (
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sharedIdleScenario: GPU 0 of nb-01 is jupyter-ann's in the scenario and
// time-sliced with three more notebooks in the series (the test's pods);
// GPU 1 is jupyter-sol's alone. Every notebook works 10 minutes, then sits
// idle with memory held until it ends at 4h.
const sharedIdleScenario = `
name: shared-idle
fleet:
  - {hostname: nb-01, model: H100-SXM5-80GB, gpus: 2}
workloads:
  - {id: jupyter-ann, scheduler: kubernetes, namespace: hub, container: notebook, user: ann, team: ds, kind: interactive, node: nb-01, gpus: [0], start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m}}
  - {id: jupyter-sol, scheduler: kubernetes, namespace: hub, container: notebook, user: sol, team: ds, kind: interactive, node: nb-01, gpus: [1], start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m}}
`

// TestSharedGPUIdleHoursCountedOnce: four idle notebooks time-sliced on
// one GPU waste that GPU's hours once between them, each its share as the
// accounting splits the device, where each used to be charged a whole
// GPU (4x the device's hours); the notebook alone on a whole GPU is
// charged its idle time in full, as before.
func TestSharedGPUIdleHoursCountedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 4 simulated hours per case")
	}
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	pods := sharedIdlePods(origin)
	for _, c := range []struct {
		name   string
		format simload.Format
	}{
		{"gpuwatch's series", simload.Format{}},
		{"stock dcgm-exporter", simload.Format{Stock: true}},
		{"dcgm-exporter's default counters, 60 s scrapes", simload.Format{Stock: true, Counters: simload.DCGMDefault, Interval: time.Minute}},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkSharedIdle(t, timeSlicedFindings(t, sharedIdleScenario, "nb-01", 5, origin, 4*time.Hour+10*time.Minute, c.format, pods))
		})
	}
}

// sharedIdlePods are the three notebooks time-sliced onto jupyter-ann's
// GPU in sharedIdleScenario. They end with jupyter-ann, so that the four
// hold the device for the same time.
func sharedIdlePods(origin time.Time) []simload.Pod {
	end := origin.Add(4 * time.Hour)
	return []simload.Pod{{Name: "jupyter-ben", Namespace: "hub", Container: "notebook", To: end},
		{Name: "jupyter-cat", Namespace: "hub", Container: "notebook", To: end},
		{Name: "jupyter-dan", Namespace: "hub", Container: "notebook", To: end}}
}

// checkSharedIdle holds the findings of sharedIdleScenario, its GPU 0
// time-sliced four ways, to a quarter of the device's idle hours each.
func checkSharedIdle(t *testing.T, fs []finding.Finding) {
	t.Helper()
	idle := map[string]*finding.Finding{}
	for i := range fs {
		if f := &fs[i]; f.Pattern == schema.IdleSession {
			idle[f.Job] = f
		}
	}
	sole := idle["hub/jupyter-sol"]
	if sole == nil {
		t.Fatalf("no idle_session of the notebook alone on GPU 1: %v", idle)
	}
	// Alone on a whole GPU: one GPU times its idle time.
	if want := sole.Evidence["idle_minutes"] / 60; math.Abs(sole.WastedGPUHours-want) > 0.01 {
		t.Errorf("alone on a GPU: %.3f GPU-h wasted, want its idle time %.3f h", sole.WastedGPUHours, want)
	}
	sum := 0.0
	for _, job := range []string{"hub/jupyter-ann", "hub/jupyter-ben", "hub/jupyter-cat", "hub/jupyter-dan"} {
		f := idle[job]
		if f == nil {
			t.Fatalf("no idle_session of %s on the shared GPU: %v", job, idle)
		}
		// Each holds a quarter of the device.
		if q := f.WastedGPUHours / sole.WastedGPUHours; q < 0.22 || q > 0.28 {
			t.Errorf("%s: %.3f GPU-h wasted, %.2f of the whole GPU's %.3f, want a quarter", job, f.WastedGPUHours, q, sole.WastedGPUHours)
		}
		sum += f.WastedGPUHours
	}
	// The shared GPU idled as long as the other: its holders'
	// waste sums to the device's hours once.
	if math.Abs(sum-sole.WastedGPUHours) > 0.03*sole.WastedGPUHours {
		t.Errorf("the shared GPU's four findings waste %.3f GPU-h together, want the device's %.3f once", sum, sole.WastedGPUHours)
	}
}
