package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// over_requested: a multi-GPU job that leaves some of its GPUs idle all
// along while the others work.
func init() {
	register(schema.OverRequested, Spec{Cumulative: true, judge: judgeOverRequested,
		Advise: func(f *finding.Finding) string {
			n := len(f.GPUs)
			if idle, ok := f.Evidence["idle_gpus"]; ok && n > 0 {
				used := n - int(idle)
				return fmt.Sprintf("Only %d of %d GPUs did work: request %s (or fix the data-parallel launch so every rank gets a GPU).", used, n, holderOf(f).gpus(used))
			}
			return "Some of its GPUs stayed idle: request only the GPUs the job uses, or check the launcher starts one rank per GPU."
		}})
}

func judgeOverRequested(j *judge) *verdict {
	c, h := j.cfg.Patterns.OverRequested, j.hist
	knownH := j.a.KnownHours
	if j.n < 2 || h.idleGPUs < 1 || h.usedGPUs < 1 || knownH < c.MinDuration.D().Hours() {
		return nil
	}
	// The idle GPUs' hours by the allocation's share of each.
	wasted := h.idleHeld
	if !j.a.Held.PerGPU {
		wasted = h.idleGPUs * knownH
	}
	return &verdict{from: j.a.Start, wasted: wasted,
		evidence: map[string]float64{"gpus": j.n, "idle_gpus": h.idleGPUs, "known_hours": knownH,
			"max_active_ratio": float64(c.MaxActiveRatio)},
		advice: fmt.Sprintf("%d of %d GPUs unused: request %d.", int(h.idleGPUs), int(j.n), int(h.usedGPUs))}
}
