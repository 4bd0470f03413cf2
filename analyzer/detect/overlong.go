package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// overlong: past the job's run-time limit: its scheduler's time limit where
// the scheduler reports one (Slurm), else the kind's configured maximum.
// The GPU-hours past the limit are over the limit (evidence
// over_limit_gpu_hours), not waste: a job working past its limit uses its
// GPUs, and idleness past it is found by the idle patterns, which count it
// as waste once.
func init() {
	register(schema.Overlong, Spec{judge: judgeOverlong,
		Advise: func(f *finding.Finding) string {
			return fmt.Sprintf("Ran past its time limit: checkpoint regularly (e.g. hourly), save state on %s, and resubmit from the checkpoint instead of running open-ended.", holderOf(f).stopSignal())
		}})
}

func judgeOverlong(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.Overlong
	configured, ok := c.MaxRuntime[a.Kind]
	maxRun, scheduler := configured.D(), 0.0
	if a.TimeLimit > 0 {
		// The scheduler's own limit for this job wins over the tier's.
		maxRun, ok, scheduler = a.TimeLimit, true, 1
	}
	if !ok || !a.StartKnown {
		return nil
	}
	limit := a.Start.Add(maxRun)
	if !j.t.After(limit) {
		return nil
	}
	// Its share of the GPUs past the limit: four holders of one
	// time-sliced GPU are over by the GPU's hours once between them.
	over := j.gpusHeld() * hours(limit, j.t)
	advice := fmt.Sprintf("Running %s, past the %s limit for %s jobs: checkpoint and release.", dur(j.t.Sub(a.Start)), dur(maxRun), a.Kind)
	if scheduler == 1 {
		advice = fmt.Sprintf("Running %s, past its scheduler time limit of %s: checkpoint and release.", dur(j.t.Sub(a.Start)), dur(maxRun))
	}
	return &verdict{from: limit, wasted: 0,
		evidence: map[string]float64{"runtime_hours": hours(a.Start, j.t), "max_runtime_hours": maxRun.Hours(),
			"scheduler_time_limit": scheduler, "gpus": j.n, "over_limit_gpu_hours": over},
		advice: advice}
}
