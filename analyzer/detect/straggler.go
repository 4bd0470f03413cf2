package detect

import (
	"fmt"
	"strings"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// straggler: in a job over several GPUs, one GPU (fewer than half of them)
// spent a fifth of its busy time or more under a throttling reason while
// its peers were not throttled, or ran at most 85 % of its peers' SM clock.
// A synchronous job (data-parallel training, any collective) waits for its
// slowest GPU at every step, so the whole job ran at that GPU's pace: the
// estimated slowdown is 1 − its mean busy SM clock over its peers', the
// time lost that share of the job's busy time, and every GPU of the job
// was degraded for it (evidence degraded_gpu_hours). Never waste: the job
// used its GPUs; never reclaims: the cure is moving the job, or the node's
// cooling or power.
func init() {
	register(schema.Straggler, Spec{judge: judgeStraggler, Cumulative: true,
		Advise: func(f *finding.Finding) string {
			return fmt.Sprintf("One GPU (%s) ran slower than its peers and held the whole job back by about %.0f%%: resubmit on other nodes, and ask the admins to check that node's cooling and power (%s).",
				f.GPU, 100*f.Evidence["slowdown"], reasonWords(f.Evidence))
		}})
}

func judgeStraggler(j *judge) *verdict {
	gs := busyGPUs(j.a)
	if len(gs) < 2 || len(gs) < len(j.a.GPUs) {
		return nil // every GPU of the job must be judged
	}
	var throttled int
	for _, g := range gs {
		if g.share >= throttleMinShare {
			throttled++
		}
	}
	if 2*throttled >= len(gs) && throttled > 0 {
		return nil // most GPUs throttled alike: throttled, no straggler
	}
	// The slowest GPU: the most throttled, else the lowest clock.
	worst := -1
	for i, g := range gs {
		if worst < 0 || g.share > gs[worst].share || (g.share == gs[worst].share && g.hasClock && g.clock < gs[worst].clock) {
			worst = i
		}
	}
	w := gs[worst]
	var peerShares, peerClocks []float64
	for i, g := range gs {
		if i == worst {
			continue
		}
		peerShares = append(peerShares, g.share)
		if g.hasClock {
			peerClocks = append(peerClocks, g.clock)
		}
	}
	peerClock := median(peerClocks)
	byReason := w.share >= throttleMinShare && median(peerShares) < peerMaxShare
	byClock := w.hasClock && peerClock > 0 && w.clock <= stragglerClockRatio*peerClock
	if !byReason && !byClock {
		return nil
	}
	ev := map[string]float64{"gpus": float64(len(gs)), "throttle_share": w.share, "peer_throttle_share": median(peerShares)}
	for i, hrs := range j.a.GPUs[w.dev].Health.ThrottledHours {
		if w.busyHours > 0 && hrs/w.busyHours >= throttleMinShare {
			ev["reason_"+reasonName(i)] = 1
		}
	}
	if w.hasClock {
		ev["sm_clock_mhz"] = w.clock
	}
	var slowdown float64
	if w.hasClock && peerClock > 0 {
		ev["peer_sm_clock_mhz"] = peerClock
		slowdown = gpuLoss(w.clock, peerClock)
		ev["slowdown"] = slowdown
	}
	var busy float64
	for _, g := range gs {
		busy = max(busy, g.busyHours)
	}
	ev["throttled_gpu_hours"] = w.share * w.busyHours
	ev["time_lost_hours"] = slowdown * busy
	ev[schema.EvidenceDegraded] = slowdown * busy * float64(len(gs))
	return &verdict{from: j.a.Start, evidence: ev, gpu: w.uuid,
		advice: fmt.Sprintf("GPU %s throttled %.0f%% of its busy time; the job ran about %.0f%% slower", w.uuid, 100*w.share, 100*slowdown)}
}

// reasonWords names the throttling reasons of a finding's evidence, the
// thermal ones first (a thermal slowdown also sets hardware slowdown).
func reasonWords(ev map[string]float64) string {
	var out []string
	for _, r := range []struct{ name, words string }{
		{schema.ReasonHWThermalSlowdown, "hardware thermal slowdown"},
		{schema.ReasonSWThermalSlowdown, "thermal slowdown"},
		{schema.ReasonSWPowerCap, "power cap"},
		{schema.ReasonHWPowerBrakeSlowdown, "power brake"},
		{schema.ReasonHWSlowdown, "hardware slowdown"},
	} {
		if ev["reason_"+r.name] > 0 {
			out = append(out, r.words)
		}
	}
	if len(out) == 0 {
		return "lower SM clock, no throttling reason in the data"
	}
	return strings.Join(out, ", ")
}
