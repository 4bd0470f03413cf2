package report

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestFleetHealthSharedGPU: the fleet report counts faults per GPU, never
// per holder: a shared GPU's holders each count as a job ended by it, but
// the node's faults and faults per 1,000 GPU-hours count the GPU once.
func TestFleetHealthSharedGPU(t *testing.T) {
	p := WeekOf(time.Date(2026, 11, 18, 12, 0, 0, 0, time.UTC), time.UTC)
	at := p.Start.Add(24 * time.Hour)
	const model = "NVIDIA H100 80GB HBM3"
	usage := []store.Usage{{Start: at, End: at.Add(time.Hour), Hostname: "h1", Job: "ns/a", Model: model, GPUs: 4,
		AllocatedGPUHours: 500, ActiveGPUHours: 500}}
	fault := func(job, gpu string, from time.Duration, ended bool) finding.Finding {
		f := finding.Finding{Pattern: schema.GPUFault, Hostname: "h1", Job: job, GPU: gpu, GPUs: []string{gpu}, ModelName: model,
			Start: at.Add(from), End: at.Add(from + time.Hour), Evidence: map[string]float64{"xid": 79}}
		if ended {
			f.Evidence["ended_by_fault"] = 1
		}
		return f
	}
	for _, c := range []struct {
		name         string
		fs           []finding.Finding
		faults, jobs int
	}{
		{"three pods on one GPU, each ended by its XID 79",
			[]finding.Finding{fault("ns/a", "GPU-a", 0, true), fault("ns/b", "GPU-a", 0, true), fault("ns/c", "GPU-a", 0, true)}, 1, 3},
		{"the shared GPU and another GPU",
			[]finding.Finding{fault("ns/a", "GPU-a", 0, false), fault("ns/b", "GPU-a", 0, false), fault("ns/d", "GPU-b", 0, true)}, 2, 1},
		{"holders coming and going", []finding.Finding{fault("ns/a", "GPU-a", 0, false), fault("ns/b", "GPU-a", 30*time.Minute, false),
			fault("ns/c", "GPU-a", 80*time.Minute, false)}, 1, 0},
		{"MIG instances of one GPU", []finding.Finding{fault("ns/a", "GPU-a/1", 0, false), fault("ns/b", "GPU-a/2", 0, false)}, 1, 0},
		{"holders without a UUID", []finding.Finding{fault("ns/a", "", 0, false), fault("ns/b", "", 0, false)}, 1, 0},
		{"a holder's finding outside the period", []finding.Finding{fault("ns/a", "GPU-a", 0, false), fault("ns/b", "GPU-a", -30*24*time.Hour, false)}, 1, 0},
		{"the GPU quiet, then faulting again", []finding.Finding{fault("ns/a", "GPU-a", 0, false), fault("ns/b", "GPU-a", 3*time.Hour, false)}, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rows := fleetHealth(usage, c.fs, p, 10)
			if len(rows) != 1 {
				t.Fatalf("rows %+v", rows)
			}
			r := rows[0]
			if r.Faults != c.faults || r.JobsEndedByGPUFault != c.jobs {
				t.Errorf("%d faults, %d jobs ended by one; want %d and %d", r.Faults, r.JobsEndedByGPUFault, c.faults, c.jobs)
			}
			if want := 1000 * float64(c.faults) / 500; r.FaultsPer1k != want || r.ModelFaultsPer1k != want {
				t.Errorf("faults per 1,000 GPU-hours %v (model %v), want %v", r.FaultsPer1k, r.ModelFaultsPer1k, want)
			}
		})
	}
}
