// Package kind classifies a job as batch, interactive or service from its
// name alone, with the defaults gpuwatch ships. The exporter applies them
// after a site's own patterns (attribution/teams); the analyzer applies them
// to data from a stock dcgm-exporter, which carries no kind.
package kind

import (
	"regexp"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// Default is one built-in pattern.
type Default struct {
	Kind string
	// Exactly one of JobName and PodName is set.
	JobName, PodName *regexp.Regexp
	Why              string
}

// Defaults returns the built-in patterns, in the order they are tried.
func Defaults() []Default {
	return []Default{
		// JupyterHub's KubeSpawner names single-user pods jupyter-<user>[--<server>].
		{Kind: source.KindInteractive, PodName: regexp.MustCompile(`^jupyter-`), Why: "JupyterHub single-user server"},
		// salloc/srun --pty sessions and most sites' interactive wrappers.
		{Kind: source.KindInteractive, JobName: regexp.MustCompile(`^interactive`), Why: "Slurm interactive job"},
		// Open OnDemand batch-connect apps: sys/dashboard/sys/<app>, sys/dashboard/dev/<app>.
		{Kind: source.KindInteractive, JobName: regexp.MustCompile(`(^|/)sys/dashboard(/|$)`), Why: "Open OnDemand interactive app"},
	}
}

var defaults = Defaults()

// Classify returns the kind of a job from its job name (Slurm) or pod name
// (Kubernetes): interactive when a built-in pattern matches, else batch.
func Classify(jobName, podName string) string {
	if k, ok := Match(jobName, podName); ok {
		return k
	}
	return source.KindBatch
}

// Match reports the kind of the first built-in pattern that matches.
func Match(jobName, podName string) (string, bool) {
	for _, d := range defaults {
		if d.JobName != nil && jobName != "" && d.JobName.MatchString(jobName) {
			return d.Kind, true
		}
		if d.PodName != nil && podName != "" && d.PodName.MatchString(podName) {
			return d.Kind, true
		}
	}
	return "", false
}
