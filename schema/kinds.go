package schema

import "regexp"

// Kinds of an allocation: the values of gpuwatch_allocation_info's kind label
// and of a policy's kinds match.
const (
	KindBatch       = "batch"
	KindInteractive = "interactive"
	KindService     = "service"
)

// Kinds lists every kind.
var Kinds = []string{KindBatch, KindInteractive, KindService}

// KindDefault is one built-in pattern that classifies a job as a kind from its
// name alone. The exporter applies them after a site's own patterns (its teams
// file); the analyzer applies them to data from a stock dcgm-exporter, which
// carries no kind.
type KindDefault struct {
	Kind string
	// Exactly one of JobName and PodName is set.
	JobName, PodName *regexp.Regexp
	Why              string
}

// KindDefaults returns the built-in patterns, in the order they are tried.
func KindDefaults() []KindDefault {
	return []KindDefault{
		// JupyterHub's KubeSpawner names single-user pods jupyter-<user>[--<server>].
		{Kind: KindInteractive, PodName: regexp.MustCompile(`^jupyter-`), Why: "JupyterHub single-user server"},
		// salloc/srun --pty sessions and most sites' interactive wrappers.
		{Kind: KindInteractive, JobName: regexp.MustCompile(`^interactive`), Why: "Slurm interactive job"},
		// Open OnDemand batch-connect apps: sys/dashboard/sys/<app>, sys/dashboard/dev/<app>.
		{Kind: KindInteractive, JobName: regexp.MustCompile(`(^|/)sys/dashboard(/|$)`), Why: "Open OnDemand interactive app"},
	}
}

var kindDefaults = KindDefaults()

// ClassifyKind returns the kind of a job from its job name (Slurm) or pod name
// (Kubernetes): interactive when a built-in pattern matches, else batch.
func ClassifyKind(jobName, podName string) string {
	if k, ok := MatchKind(jobName, podName); ok {
		return k
	}
	return KindBatch
}

// MatchKind reports the kind of the first built-in pattern that matches.
func MatchKind(jobName, podName string) (string, bool) {
	for _, d := range kindDefaults {
		if d.JobName != nil && jobName != "" && d.JobName.MatchString(jobName) {
			return d.Kind, true
		}
		if d.PodName != nil && podName != "" && d.PodName.MatchString(podName) {
			return d.Kind, true
		}
	}
	return "", false
}
