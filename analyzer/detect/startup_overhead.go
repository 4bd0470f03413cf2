package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// startup_overhead: GPUs held long before their first use; judged once, when
// the first activity is seen, and only when the start was observed. A
// service's wait for its first request is not staging.
func init() {
	register(schema.StartupOverhead, Spec{OneOff: true, judge: judgeStartup,
		Advise: func(f *finding.Finding) string {
			lead := "Waited long"
			if m, ok := f.Evidence["delay_minutes"]; ok {
				lead = fmt.Sprintf("Waited %.0f minutes", m)
			}
			return lead + " before first GPU use: " + holderOf(f).stageFirst() + "."
		}})
}

func judgeStartup(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.StartupOverhead
	if j.interactive || j.service || !a.StartKnown || a.FirstActive.IsZero() {
		return nil
	}
	delay := a.FirstActive.Sub(a.Start)
	if delay < c.MinDelay.D() {
		return &verdict{quiet: true}
	}
	return &verdict{from: a.Start, to: a.FirstActive, wasted: j.heldToFirstActive(delay),
		evidence: map[string]float64{"delay_minutes": delay.Minutes(), "gpus": j.n,
			"threshold_minutes": c.MinDelay.D().Minutes()},
		advice: fmt.Sprintf("GPUs held %s before first use: stage data and pull images before requesting GPUs.", dur(delay))}
}
