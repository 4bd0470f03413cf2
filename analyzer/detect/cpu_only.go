package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// cpu_only: a job of any kind whose GPUs never showed a sign of use since
// it started, with no process holding memory on them. Memory held means a
// model is loaded: a service waiting for its first request, or a job that
// hangs before its first kernel, neither of which CPU nodes would serve. A
// bare CUDA context (a few hundred MiB, under idle.memory_held_mib) is no
// model: a service image that fell back to the CPU holds one.
//
// The kind decides the treatment, not whether it is seen: a batch job's or
// a session's GPUs are reclaimed, a service is only advised, since taking
// its GPU is a change to its deployment that its owner makes.
func init() {
	register(schema.CPUOnly, Spec{judge: judgeCPUOnly,
		Advise: func(f *finding.Finding) string {
			if f.Kind == schema.KindService {
				return fmt.Sprintf("Holds %s that the service never used: drop the nvidia.com/gpu request from its deployment, or check that its image and code select CUDA (a CPU fallback is the usual cause).", plural(len(f.GPUs), "GPU"))
			}
			return fmt.Sprintf("Held %s without ever using the GPU: %s, or check that the code actually selects CUDA.", plural(len(f.GPUs), "GPU"), holderOf(f).noGPUs())
		}})
}

func judgeCPUOnly(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.CPUOnly
	if !a.FirstActive.IsZero() || a.IdleSince.IsZero() || !a.IdleSince.Equal(a.Start) ||
		j.since(a.IdleSince) < c.MinDuration.D() || j.fbMax > j.cfg.Idle.MemoryHeldMiB {
		return nil
	}
	idle := j.since(a.IdleSince)
	v := &verdict{from: a.IdleSince, wasted: j.heldSince(a.IdleSince, a.Held.Idle),
		evidence: map[string]float64{"idle_minutes": idle.Minutes(), "gpus": j.n, "fb_max_mib": j.fbMax,
			"threshold_minutes": c.MinDuration.D().Minutes()},
		advice: fmt.Sprintf("No GPU activity on %d GPU(s) for %s since the job started: run it on CPU nodes or release the GPUs.", len(a.GPUs), dur(idle))}
	if a.Kind == schema.KindService {
		v.action, v.severity = schema.ActionNotify, schema.SeverityWarning
		v.advice = fmt.Sprintf("No GPU activity on %d GPU(s) for %s since the service started: it runs on the CPU; drop its GPU request or fix its CUDA setup.", len(a.GPUs), dur(idle))
	}
	return v
}
