// Package facts is what the analyzer learns about an allocation from the
// system that owns it, at decision time: Slurm (one squeue call per cycle)
// or the Kubernetes API server (one list of pods and of namespaces per
// cycle). It also defines the attributes a policy may match, once: the
// policy parser, the escalation and the documentation read them from here,
// and every attribute is filled by at least one Source.
package facts

import "sort"

// Attr is an attribute of an allocation that a policy tier or exemption can
// match.
type Attr string

// The attributes. Scalar attributes hold one value; map attributes (labels,
// annotations) hold key/value pairs.
const (
	Partition       Attr = "partition"        // Slurm partition
	QoS             Attr = "qos"              // Slurm quality of service
	Account         Attr = "account"          // Slurm account
	User            Attr = "user"             // Slurm job owner
	JobName         Attr = "job_name"         // Slurm job name
	Namespace       Attr = "namespace"        // Kubernetes namespace
	Owner           Attr = "owner"            // Kubernetes controller kind (Job, ReplicaSet, StatefulSet, ...)
	Team            Attr = "team"             // from the teams file applied to the owner's facts
	Kind            Attr = "kind"             // batch, interactive or service
	PodLabels       Attr = "pod_labels"       // Kubernetes pod labels
	PodAnnotations  Attr = "pod_annotations"  // Kubernetes pod annotations
	NamespaceLabels Attr = "namespace_labels" // labels of the pod's namespace
)

// Spec describes one attribute for the policy file and its documentation.
type Spec struct {
	Attr Attr
	// MatchKey is its key under a tier's match.
	MatchKey string
	// Map attributes are matched as {key: glob}; scalar ones as a list of globs.
	Map bool
	// Sources names the schedulers that fill it.
	Sources []string
	Doc     string
}

// Scheduler names, as findings carry them.
const (
	Slurm      = "slurm"
	Kubernetes = "kubernetes"
)

// Specs lists every attribute a policy may match, in documentation order.
var Specs = []Spec{
	{Partition, "partitions", false, []string{Slurm}, "Slurm partition (squeue)"},
	{QoS, "qos", false, []string{Slurm}, "Slurm QoS (squeue)"},
	{Account, "accounts", false, []string{Slurm}, "Slurm account (squeue)"},
	{User, "users", false, []string{Slurm}, "Slurm job owner (squeue)"},
	{JobName, "job_names", false, []string{Slurm}, "Slurm job name (squeue)"},
	{Namespace, "namespaces", false, []string{Kubernetes}, "pod namespace (API server)"},
	{Owner, "owners", false, []string{Kubernetes}, "kind of the pod's controller, e.g. Job, ReplicaSet, StatefulSet (API server)"},
	{Team, "teams", false, []string{Slurm, Kubernetes}, "team from the teams file (pod_label, namespaces, accounts, users) applied to the facts above"},
	{Kind, "kinds", false, []string{Slurm, Kubernetes}, "batch, interactive or service, from the teams file's kinds applied to the job or pod name"},
	{PodLabels, "labels", true, []string{Kubernetes}, "pod labels (API server)"},
	{PodAnnotations, "annotations", true, []string{Kubernetes}, "pod annotations (API server)"},
	{NamespaceLabels, "namespace_labels", true, []string{Kubernetes}, "labels of the pod's namespace (API server)"},
}

// ByMatchKey returns the attribute a match key names.
func ByMatchKey(key string) (Spec, bool) {
	for _, s := range Specs {
		if s.MatchKey == key {
			return s, true
		}
	}
	return Spec{}, false
}

// SpecOf returns the spec of a.
func SpecOf(a Attr) Spec {
	for _, s := range Specs {
		if s.Attr == a {
			return s
		}
	}
	return Spec{Attr: a, MatchKey: string(a)}
}

// MatchKeys lists the match keys, sorted.
func MatchKeys() []string {
	out := make([]string, 0, len(Specs))
	for _, s := range Specs {
		out = append(out, s.MatchKey)
	}
	sort.Strings(out)
	return out
}

// ExemptKey is the pod label or annotation that exempts an allocation; its
// value is "true" or an RFC 3339 time until which it holds.
const ExemptKey = "gpuwatch.io/exempt"
