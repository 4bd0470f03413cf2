package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/gpumodel"
	"github.com/gpuwatch/gpuwatch/schema"
)

// low_utilization: whole GPUs used lightly all along, with memory that
// would fit a MIG slice or a smaller GPU.
func init() {
	register(schema.LowUtilization, Spec{Cumulative: true,
		judge: judgeLowUtilization, Advise: adviseLowUtilization})
}

func judgeLowUtilization(j *judge) *verdict {
	c, h := j.cfg.Patterns.LowUtilization, j.hist
	knownH := j.a.KnownHours
	if !h.lowAll || !h.lowAny || knownH < c.MinDuration.D().Hours() {
		return nil
	}
	mean := h.sumRatio / h.steps
	ev := map[string]float64{"gpus": j.n, "known_hours": knownH, "peak_step_ratio": h.peak,
		"fb_max_mib": j.fbMax, "fb_total_mib": j.fbTotal}
	if h.usesSM {
		ev["mean_sm_active"] = mean
	} else {
		ev["mean_util_percent"] = mean * 100
	}
	return &verdict{from: j.a.Start, wasted: j.heldKnown() * (1 - mean), evidence: ev,
		advice: fmt.Sprintf("Mean use %.0f%% of %d GPU(s), peak memory %.0f of %.0f MiB: a MIG slice or a smaller GPU would do.",
			mean*100, int(j.n), j.fbMax, j.fbTotal)}
}

// adviseLowUtilization names the MIG profile or the smaller GPU that would
// hold the job's peak memory.
func adviseLowUtilization(f *finding.Finding) string {
	use := "used its GPU lightly"
	if u, ok := f.Evidence["mean_util_percent"]; ok {
		use = fmt.Sprintf("averaged %.0f%% GPU utilisation", u)
	} else if s, ok := f.Evidence["mean_sm_active"]; ok {
		use = fmt.Sprintf("averaged %.0f%% SM activity", s*100)
	}
	peakMiB, ok := f.Evidence["fb_max_mib"]
	if !ok {
		return capital(use) + ": request a MIG slice or a smaller GPU, or pack several runs onto one GPU (MPS)."
	}
	peak := peakMiB / 1024
	if p, fits := gpumodel.FitMIG(f.ModelName, peak); fits {
		return fmt.Sprintf("%s and peaked at %.1f GiB of GPU memory: a MIG %s slice (%.0f GiB, %d/7 of the GPU) would fit it and free the rest for others: request %s.",
			capital(use), peak, p.Name, p.MemGiB, p.Slices, holderOf(f).migSlice(p.Name))
	}
	if g, fits := gpumodel.SmallerGPU(f.ModelName, peak); fits {
		return fmt.Sprintf("%s and peaked at %.1f GiB of GPU memory: a smaller GPU such as the %s would do; or share the GPU (MPS) with similar jobs.",
			capital(use), peak, g)
	}
	return fmt.Sprintf("%s with %.1f GiB of memory: batch more work per GPU (larger batches, several runs per GPU with MPS).", capital(use), peak)
}
