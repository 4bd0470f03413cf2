package engine

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/schema"
)

// ncclHangScenario: two ranks of a job that hang in a collective after an
// hour of training (their channel blocks resident: SM activity in the low
// tenths), beside the hang's look-alikes: a small-batch inference job (SM
// activity in the same tenths, but DRAM, tensor and memory-copy work, power
// swinging) and a training job starved by its data loader (util drops).
const ncclHangScenario = `
name: nccl-hang
fleet:
  - {hostname: hg-01, model: H100-SXM5-80GB, gpus: 4}
workloads:
  - {id: "5101", scheduler: slurm, user: ann, team: ml, node: hg-01, gpus: [0, 1], start: 0s, duration: 5h, behaviour: nccl_hang, params: {active: 1h}}
  - {id: "5102", scheduler: slurm, user: bob, team: ml, node: hg-01, gpus: [2], start: 0s, duration: 5h, behaviour: small_batch_inference}
  - {id: "5103", scheduler: slurm, user: cy, team: ml, node: hg-01, gpus: [3], start: 0s, duration: 5h, behaviour: bursty_training, params: {stall_every: 5m, stall: 3m}}
`

// TestNCCLHangSignature: a real hang's readings, replayed through the
// embedded store, are stuck in gpuwatch's own counters, dcgm-exporter's
// DCP set (no SM activity: DRAM and tensor decide) and its default set
// (no activity ratios: power and memory-copy util decide); the look-alikes
// get no reclaiming finding in any of them.
func TestNCCLHangSignature(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 5 simulated hours per counter set")
	}
	for _, c := range []struct {
		name   string
		format simload.Format
	}{
		{"gpuwatch's counters (SM activity)", simload.Format{}},
		{"dcgm-exporter's DCP counters", simload.Format{Stock: true, Counters: simload.DCGMDCP, Host: schema.LabelHostname}},
		{"dcgm-exporter's default counters", simload.Format{Stock: true, Counters: simload.DCGMDefault}},
	} {
		t.Run(c.name, func(t *testing.T) { checkNCCLHang(t, ncclHangFindings(t, c.format)) })
	}
}

// checkNCCLHang holds the findings of ncclHangScenario to its judgement:
// the hung job stuck, no reclaiming finding on a look-alike.
func checkNCCLHang(t *testing.T, fs []finding.Finding) {
	t.Helper()
	stuck := map[string]bool{}
	for _, f := range fs {
		if f.Pattern == schema.Stuck {
			stuck[f.Job] = true
		}
		if f.Job != "5101" && f.Action == schema.ActionReclaim {
			t.Errorf("look-alike %s: reclaiming finding %s, evidence %v", f.Job, f.Pattern, f.Evidence)
		}
	}
	if !stuck["5101"] {
		t.Errorf("the hung job 5101 is not stuck")
	}
}

func ncclHangFindings(t *testing.T, f simload.Format) []finding.Finding {
	t.Helper()
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	span := 5*time.Hour + 10*time.Minute
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "nccl-hang.yaml", ncclHangScenario),
		simload.Options{Seed: 5, Origin: origin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second}, f.Sink)
	return analyzeSpan(t, db, config.Default(), origin, origin.Add(span)).Findings
}
