package detect

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// overlong: past the kind's maximum run time. The GPU-hours past the limit
// are over the limit (evidence over_limit_gpu_hours), not waste: a job
// working past its limit uses its GPUs, and idleness past it is found by
// the idle patterns, which count it as waste once.
func init() {
	register(schema.Overlong, Spec{judge: judgeOverlong,
		Advise: func(*finding.Finding) string {
			return "Ran past its tier's time limit: checkpoint regularly (e.g. hourly), handle SIGUSR1 to save state, and resubmit from the checkpoint instead of running open-ended."
		}})
}

func judgeOverlong(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.Overlong
	maxRun, ok := c.MaxRuntime[a.Kind]
	if !ok || !a.StartKnown {
		return nil
	}
	limit := a.Start.Add(maxRun.D())
	if !j.t.After(limit) {
		return nil
	}
	over := j.n * hours(limit, j.t)
	return &verdict{from: limit, wasted: 0,
		evidence: map[string]float64{"runtime_hours": hours(a.Start, j.t), "max_runtime_hours": maxRun.D().Hours(),
			"gpus": j.n, "over_limit_gpu_hours": over},
		advice: fmt.Sprintf("Running %s, past the %s limit for %s jobs: checkpoint and release.", dur(j.since(a.Start)), dur(maxRun.D()), a.Kind)}
}
