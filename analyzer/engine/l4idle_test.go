package engine

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/schema"
)

// l4IdleScenario: an inference node of L4s. Two notebooks work 10 minutes,
// then hold their contexts doing nothing until 4h: an L4 holding a context
// leaves its deepest power state and draws about 35 W, 0.49 of its 72 W
// TDP. Beside them an inference service answers requests (small batches)
// and a batch job hangs in a collective after an hour, its board a little
// over that idle draw. GPU 4 stays spare (16 W, no context).
const l4IdleScenario = `
name: l4-idle
fleet:
  - {hostname: l4-01, model: L4, gpus: 5}
workloads:
  - {id: jupyter-ann, scheduler: kubernetes, namespace: hub, container: notebook, user: ann, team: ds, kind: interactive, node: l4-01, gpus: [0], start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m}}
  - {id: jupyter-bob, scheduler: kubernetes, namespace: hub, container: notebook, user: bob, team: ds, kind: interactive, node: l4-01, gpus: [1], start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m}}
  - {id: llm-serve, scheduler: kubernetes, namespace: serve, container: server, user: svc, team: ml, kind: service, node: l4-01, gpus: [2], start: 0s, duration: 4h, behaviour: small_batch_inference, params: {util: 30, memory_gib: 12}}
  - {id: "6101", scheduler: slurm, user: cy, team: ml, node: l4-01, gpus: [3], start: 0s, duration: 4h, behaviour: nccl_hang, params: {active: 1h, memory_gib: 16}}
`

// TestL4IdleNotebooksJudgedByTheirFloor: idle notebooks on L4s, replayed
// through the embedded store, are idle sessions in gpuwatch's counters and
// in dcgm-exporter's default set, where a veto at 0.4 of TDP called them
// busy; the L4's floor is learnt from the notebooks' own idle steps (not
// the spare board's) and analyze says so; the service gets no idle
// finding, and the hung job is still stuck.
func TestL4IdleNotebooksJudgedByTheirFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 4 simulated hours per counter set")
	}
	for _, c := range []struct {
		name   string
		format simload.Format
	}{
		{"gpuwatch's counters", simload.Format{}},
		{"dcgm-exporter's default counters", simload.Format{Stock: true, Counters: simload.DCGMDefault}},
	} {
		t.Run(c.name, func(t *testing.T) { checkL4Idle(t, l4Analysis(t, c.format)) })
	}
}

// checkL4Idle holds an analysis of l4IdleScenario to its judgement: both
// notebooks idle sessions, the service not idle, the hang stuck, and the
// L4's floor learnt from the notebooks' idle steps.
func checkL4Idle(t *testing.T, a Analysis) {
	t.Helper()
	got := map[string]map[schema.Pattern]bool{}
	for _, f := range a.Findings {
		if got[f.Job] == nil {
			got[f.Job] = map[schema.Pattern]bool{}
		}
		got[f.Job][f.Pattern] = true
	}
	for _, nb := range []string{"hub/jupyter-ann", "hub/jupyter-bob"} {
		if !got[nb][schema.IdleSession] {
			t.Errorf("%s, idle holding its context on an L4: %v, want idle_session", nb, got[nb])
		}
	}
	if s := got["serve/llm-serve"]; s[schema.IdleSession] || s[schema.CPUOnly] || s[schema.Stuck] {
		t.Errorf("the serving L4: %v, want no idle or stuck finding", s)
	}
	if !got["6101"][schema.Stuck] {
		t.Errorf("the hung job on an L4: %v, want stuck", got["6101"])
	}
	var l4 *detect.IdleFloor
	for i, f := range a.Coverage.IdleFloors {
		if f.Model == "NVIDIA L4" {
			l4 = &a.Coverage.IdleFloors[i]
		}
	}
	// The two notebooks' idle steps teach it (the hung job's and
	// the service's are busy, the spare holds no context).
	if l4 == nil || !l4.Learned || l4.GPUs != 2 || l4.Watts < 33 || l4.Watts > 40 {
		t.Errorf("L4 floor %+v, want learnt from the 2 notebooks' GPUs, near 35 W", l4)
	}
}

func l4Analysis(t *testing.T, f simload.Format) Analysis {
	t.Helper()
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	span := 4*time.Hour + 10*time.Minute
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "l4-idle.yaml", l4IdleScenario),
		simload.Options{Seed: 7, Origin: origin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second}, f.Sink)
	return analyzeSpan(t, db, config.Default(), origin, origin.Add(span))
}
