package detect

import "strings"

// Kinds (the values of gpuwatch_allocation_info's kind label).
const (
	KindBatch       = "batch"
	KindInteractive = "interactive"
	KindService     = "service"
)

// GuessKind classifies an allocation from its names when no
// gpuwatch_allocation_info says (a stock dcgm-exporter): JupyterHub's
// jupyter-<user> pods and Open OnDemand's sys/dashboard sessions and Slurm
// jobs named interactive* are interactive; everything else is batch. It
// returns the user a JupyterHub pod name carries, if any.
//
// The exporter's attribution applies the same default patterns; this copy
// exists because the analyzer must classify data it did not export itself.
func GuessKind(pod, jobName string) (kind, user string) {
	if u, ok := strings.CutPrefix(pod, "jupyter-"); ok && u != "" {
		return KindInteractive, u
	}
	for _, n := range []string{jobName, pod} {
		if strings.HasPrefix(n, "interactive") || strings.HasPrefix(n, "sys/dashboard") {
			return KindInteractive, ""
		}
	}
	return KindBatch, ""
}
