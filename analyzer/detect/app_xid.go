package detect

import (
	"fmt"
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/schema"
)

// app_xid: an XID that NVIDIA's catalogue attributes to the application
// (13, 31, 43, 45, 69: an illegal address or instruction, a kernel that
// faulted, the cleanup after it). The GPU is not blamed: no gpu_fault, no
// drain; the owner is told their code faulted. Never waste, never
// reclaims.
func init() {
	register(schema.AppXID, Spec{judge: judgeAppXID, Cumulative: true,
		Advise: func(f *finding.Finding) string {
			x := health.XID(int(f.Evidence["xid"]))
			return fmt.Sprintf("The job's own code raised XID %d (%s) on GPU %s: the GPU is healthy; run the job under compute-sanitizer or check its kernels and memory accesses.", x.Code, x.Meaning, f.GPU)
		}})
}

func judgeAppXID(j *judge) *verdict {
	devs := make([]string, 0, len(j.a.GPUs))
	for dev := range j.a.GPUs {
		devs = append(devs, dev)
	}
	sort.Strings(devs)
	for _, dev := range devs {
		g := j.a.GPUs[dev]
		h := &g.Health
		if h.AppXIDAt.IsZero() {
			continue
		}
		ev := map[string]float64{"xid": float64(h.AppXID), "xid_count": float64(h.XIDs[h.AppXID])}
		return &verdict{from: h.AppXIDAt, evidence: ev, gpu: g.UUID,
			advice: fmt.Sprintf("XID %d on GPU %s: %s", h.AppXID, g.UUID, health.XID(h.AppXID).Meaning)}
	}
	return nil
}
