package detect

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// cpu_only: a non-interactive job whose GPUs never showed a sign of use
// since it started, with no process holding memory on them. Memory held
// means a model is loaded: a service waiting for its first request, or a
// job that hangs before its first kernel, neither of which CPU nodes would
// serve.
func init() {
	register(schema.CPUOnly, Spec{judge: judgeCPUOnly,
		Advise: func(f *finding.Finding) string {
			return fmt.Sprintf("Held %s without ever using the GPU: run it in a CPU partition (no --gres=gpu / no nvidia.com/gpu request), or check that the code actually selects CUDA.", plural(len(f.GPUs), "GPU"))
		}})
}

func judgeCPUOnly(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.CPUOnly
	if j.interactive || j.service || !a.FirstActive.IsZero() || a.IdleSince.IsZero() || !a.IdleSince.Equal(a.Start) ||
		j.since(a.IdleSince) < c.MinDuration.D() || j.fbMax > j.cfg.Idle.MemoryHeldMiB {
		return nil
	}
	idle := j.since(a.IdleSince)
	return &verdict{from: a.IdleSince, wasted: j.n * idle.Hours(),
		evidence: map[string]float64{"idle_minutes": idle.Minutes(), "gpus": j.n, "fb_max_mib": j.fbMax,
			"threshold_minutes": c.MinDuration.D().Minutes()},
		advice: fmt.Sprintf("No GPU activity on %d GPU(s) for %s since the job started: run it on CPU nodes or release the GPUs.", len(a.GPUs), dur(idle))}
}
