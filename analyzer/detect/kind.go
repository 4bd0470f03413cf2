package detect

import (
	"regexp"
	"strings"

	"github.com/gpuwatch/gpuwatch/schema"
)

// deploymentPod matches the names Kubernetes gives a Deployment's pods:
// <name>-<pod-template-hash>-<suffix>, both drawn from the vowel-free
// alphabet of rand.SafeEncodeString, so ordinary words do not match. A
// Deployment keeps its pods running: a service, not a batch job.
var deploymentPod = regexp.MustCompile(`-[bcdfghjklmnpqrstvwxz2456789]{6,10}-[bcdfghjklmnpqrstvwxz2456789]{5}$`)

// GuessKind classifies an allocation from its names when no
// gpuwatch_allocation_info says (a stock dcgm-exporter), with the exporter's
// own default patterns (JupyterHub jupyter-<user> pods, Slurm jobs named
// interactive*, Open OnDemand sys/dashboard apps): interactive when one
// matches, service for a Deployment's pod, else batch. It also returns the user a JupyterHub pod name
// carries, if any.
func GuessKind(pod, jobName string) (k, user string) {
	k = schema.ClassifyKind(jobName, pod)
	if k == schema.KindBatch && deploymentPod.MatchString(pod) {
		k = schema.KindService
	}
	if u, ok := strings.CutPrefix(pod, "jupyter-"); ok && k == schema.KindInteractive {
		// KubeSpawner: jupyter-<user>[--<server>].
		user, _, _ = strings.Cut(u, "--")
	}
	return k, user
}
