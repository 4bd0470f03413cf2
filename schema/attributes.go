package schema

import "sort"

// Schedulers that own allocations: the `scheduler` value of
// gpuwatch_allocation_info and of findings.
const (
	SchedulerSlurm      = "slurm"
	SchedulerKubernetes = "kubernetes"
)

// Attr is an attribute of an allocation: a label of gpuwatch_allocation_info,
// a fact a policy tier or exemption can match, or both.
type Attr string

// The attributes. Scalar attributes hold one value; map attributes (labels,
// annotations) hold key/value pairs.
const (
	AttrScheduler       Attr = LabelScheduler // slurm or kubernetes
	AttrJob             Attr = LabelJob       // hpc_job id, or namespace/pod
	AttrPartition       Attr = "partition"    // Slurm partition
	AttrQoS             Attr = "qos"          // Slurm quality of service
	AttrAccount         Attr = LabelAccount   // Slurm account
	AttrUser            Attr = LabelUser      // job owner
	AttrJobName         Attr = LabelJobName   // Slurm job name
	AttrNamespace       Attr = LabelNamespace // Kubernetes namespace
	AttrOwner           Attr = "owner"        // Kubernetes controller kind (Job, ReplicaSet, StatefulSet, ...)
	AttrTeam            Attr = LabelTeam      // from the teams file applied to the owner's facts
	AttrKind            Attr = LabelKind      // batch, interactive or service
	AttrPodLabels       Attr = "pod_labels"
	AttrPodAnnotations  Attr = "pod_annotations"
	AttrNamespaceLabels Attr = "namespace_labels"
)

// AttrSpec describes one attribute of an allocation.
type AttrSpec struct {
	Attr Attr
	// Info is true for the attributes gpuwatch_allocation_info carries as
	// labels (AllocationInfo.Labels).
	Info bool
	// MatchKey is its key under a policy tier's match; "" when a policy
	// cannot match it.
	MatchKey string
	// Map attributes are matched as {key: glob}; scalar ones as a list of globs.
	Map bool
	// Sources names the schedulers whose facts fill it at decision time.
	Sources []string
	Doc     string
}

// AllocationAttrs is the one list of an allocation's attributes: those a
// policy may match, in documentation order, then those only the exporter
// publishes. The exporter's allocation labels, the policy parser, the facts
// at decision time and the documentation all read it.
var AllocationAttrs = []AttrSpec{
	{AttrPartition, false, "partitions", false, []string{SchedulerSlurm}, "Slurm partition (squeue)"},
	{AttrQoS, false, "qos", false, []string{SchedulerSlurm}, "Slurm QoS (squeue)"},
	{AttrAccount, true, "accounts", false, []string{SchedulerSlurm}, "Slurm account (squeue)"},
	{AttrUser, true, "users", false, []string{SchedulerSlurm}, "Slurm job owner (squeue)"},
	{AttrJobName, true, "job_names", false, []string{SchedulerSlurm}, "Slurm job name (squeue)"},
	{AttrNamespace, false, "namespaces", false, []string{SchedulerKubernetes}, "pod namespace (API server)"},
	{AttrOwner, false, "owners", false, []string{SchedulerKubernetes}, "kind of the pod's controller, e.g. Job, ReplicaSet, StatefulSet (API server)"},
	{AttrTeam, true, "teams", false, []string{SchedulerSlurm, SchedulerKubernetes}, "team from the teams file (pod_label, namespaces, accounts, users) applied to the facts above"},
	{AttrKind, true, "kinds", false, []string{SchedulerSlurm, SchedulerKubernetes}, "batch, interactive or service, from the teams file's kinds applied to the job or pod name"},
	{AttrPodLabels, false, "labels", true, []string{SchedulerKubernetes}, "pod labels (API server)"},
	{AttrPodAnnotations, false, "annotations", true, []string{SchedulerKubernetes}, "pod annotations (API server)"},
	{AttrNamespaceLabels, false, "namespace_labels", true, []string{SchedulerKubernetes}, "labels of the pod's namespace (API server)"},
	{AttrJob, true, "", false, nil, "hpc_job id, or namespace/pod"},
	{AttrScheduler, true, "", false, nil, "slurm or kubernetes"},
}

// Allocation is one holder of a GPU described by its attributes: its fields
// are exactly AllocationAttrs, the labels of gpuwatch_allocation_info and the
// keys a policy may match, and Value, Map and Set are the one mapping from
// attribute to field.
type Allocation struct {
	Scheduler, Job                             string
	Partition, QoS, Account, User, JobName     string
	Namespace, Owner, Team, Kind               string
	PodLabels, PodAnnotations, NamespaceLabels map[string]string
}

func (a *Allocation) scalar(attr Attr) *string {
	switch attr {
	case AttrScheduler:
		return &a.Scheduler
	case AttrJob:
		return &a.Job
	case AttrPartition:
		return &a.Partition
	case AttrQoS:
		return &a.QoS
	case AttrAccount:
		return &a.Account
	case AttrUser:
		return &a.User
	case AttrJobName:
		return &a.JobName
	case AttrNamespace:
		return &a.Namespace
	case AttrOwner:
		return &a.Owner
	case AttrTeam:
		return &a.Team
	case AttrKind:
		return &a.Kind
	}
	return nil
}

func (a *Allocation) mapOf(attr Attr) *map[string]string {
	switch attr {
	case AttrPodLabels:
		return &a.PodLabels
	case AttrPodAnnotations:
		return &a.PodAnnotations
	case AttrNamespaceLabels:
		return &a.NamespaceLabels
	}
	return nil
}

// Value returns a scalar attribute; "" for a map attribute or an unknown one.
func (a *Allocation) Value(attr Attr) string {
	if p := a.scalar(attr); p != nil {
		return *p
	}
	return ""
}

// Map returns a map attribute; nil for a scalar attribute or an unknown one.
func (a *Allocation) Map(attr Attr) map[string]string {
	if p := a.mapOf(attr); p != nil {
		return *p
	}
	return nil
}

// Set sets a scalar attribute and reports whether attr is one.
func (a *Allocation) Set(attr Attr, v string) bool {
	p := a.scalar(attr)
	if p != nil {
		*p = v
	}
	return p != nil
}

// SetMap sets a map attribute and reports whether attr is one.
func (a *Allocation) SetMap(attr Attr, m map[string]string) bool {
	p := a.mapOf(attr)
	if p != nil {
		*p = m
	}
	return p != nil
}

// InfoLabelValues returns the values of gpuwatch_allocation_info's labels
// (AllocationInfo.Labels), in order.
func (a *Allocation) InfoLabelValues() []string {
	out := make([]string, len(AllocationInfo.Labels))
	for i, l := range AllocationInfo.Labels {
		out[i] = a.Value(Attr(l))
	}
	return out
}

// MatchAttrs lists the attributes a policy may match, in documentation order.
func MatchAttrs() []AttrSpec {
	var out []AttrSpec
	for _, s := range AllocationAttrs {
		if s.MatchKey != "" {
			out = append(out, s)
		}
	}
	return out
}

// AttrByMatchKey returns the attribute a policy match key names.
func AttrByMatchKey(key string) (AttrSpec, bool) {
	for _, s := range AllocationAttrs {
		if s.MatchKey != "" && s.MatchKey == key {
			return s, true
		}
	}
	return AttrSpec{}, false
}

// Spec returns the description of a.
func (a Attr) Spec() AttrSpec {
	for _, s := range AllocationAttrs {
		if s.Attr == a {
			return s
		}
	}
	return AttrSpec{Attr: a, MatchKey: string(a)}
}

// MatchKeys lists the policy match keys, sorted.
func MatchKeys() []string {
	var out []string
	for _, s := range MatchAttrs() {
		out = append(out, s.MatchKey)
	}
	sort.Strings(out)
	return out
}

// ExemptKey is the pod label or annotation that exempts an allocation; its
// value is "true" or an RFC 3339 time until which it holds.
const ExemptKey = "gpuwatch.io/exempt"
