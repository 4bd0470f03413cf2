package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// throttled: half or more of a job's GPUs spent a fifth of their busy time
// or more under a throttling clock-event reason (power cap, thermal or
// hardware slowdown, power brake). The estimated slowdown is 1 − the mean
// busy SM clock over the model's maximum (NVIDIA's data sheet), for the
// slowest GPU; without a known maximum or an SM clock the share is
// reported and the slowdown is not estimated. Never waste, never reclaims.
func init() {
	register(schema.Throttled, Spec{judge: judgeThrottled, Cumulative: true,
		Advise: func(f *finding.Finding) string {
			return fmt.Sprintf("The GPUs were throttled (%s) for %.0f%% of their busy time, about %.0f%% slower than at full clock: ask the admins about the node's power limits and cooling.",
				reasonWords(f.Evidence), 100*f.Evidence["throttle_share"], 100*f.Evidence["slowdown"])
		}})
}

func judgeThrottled(j *judge) *verdict {
	gs := busyGPUs(j.a)
	if len(gs) == 0 || len(gs) < len(j.a.GPUs) {
		return nil
	}
	var throttled, sumShare, busy, slowdown, throttledHours float64
	for _, g := range gs {
		busy = max(busy, g.busyHours)
		if g.share < throttleMinShare {
			continue
		}
		throttled++
		sumShare += g.share
		throttledHours += g.share * g.busyHours
		if ref := maxClock(g.model); g.hasClock && ref > 0 {
			slowdown = max(slowdown, gpuLoss(g.clock, ref))
		}
	}
	if throttled == 0 || 2*throttled < float64(len(gs)) {
		return nil
	}
	ev := map[string]float64{"gpus": float64(len(gs)), "throttled_gpus": throttled, "throttle_share": sumShare / throttled,
		"slowdown": slowdown, "throttled_gpu_hours": throttledHours, "time_lost_hours": slowdown * busy, schema.EvidenceDegraded: slowdown * busy * float64(len(gs))}
	for _, g := range gs {
		for i, hrs := range j.a.GPUs[g.dev].Health.ThrottledHours {
			if g.busyHours > 0 && hrs/g.busyHours >= throttleMinShare {
				ev["reason_"+reasonName(i)] = 1
			}
		}
	}
	return &verdict{from: j.a.Start, evidence: ev,
		advice: fmt.Sprintf("%.0f of %d GPUs throttled %.0f%% of their busy time", throttled, len(gs), 100*sumShare/throttled)}
}
