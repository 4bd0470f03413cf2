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
	// Owner is who writes the attribute: OwnerOperator (the scheduler or
	// API server on the operator's terms) or OwnerWorkload (the author of
	// the job or pod). A policy chooses tiers and exemptions by a
	// workload-owned attribute only where the operator trusts it key by key.
	Owner Owner
	// Writers says who can set the attribute's value, in words for the
	// operator (check-config's warnings, the documentation).
	Writers string
}

// Owner is who writes an attribute of an allocation.
type Owner string

// The owners of attributes.
const (
	// OwnerOperator: the scheduler's record, the API server's, or the
	// operator's own files; a job's author cannot choose it beyond what the
	// operator allows.
	OwnerOperator Owner = "operator"
	// OwnerWorkload: text the job's or pod's author writes freely.
	OwnerWorkload Owner = "workload"
)

// Who can write what, for the specs below.
const (
	writersSlurm   = "the operator (slurm.conf, sacctmgr); a job gets only what its submitter is allowed"
	writersJobName = "the job's submitter (sbatch --job-name, scontrol update JobName=)"
	writersKube    = "the API server, from objects the operator's RBAC governs"
	writersPod     = "any user who can create or update pods in the pod's namespace"
	writersNSLabel = "whoever may update the namespace (cluster administrators, as a rule)"
	writersTeam    = "the operator's teams file (and the pod's author only where the teams file names a pod_label)"
	writersKind    = "whoever names the job or pod (the job's submitter; any user who can create pods in the namespace), through the teams file's kinds"
)

// AllocationAttrs is the one list of an allocation's attributes: those a
// policy may match, in documentation order, then those only the exporter
// publishes. The exporter's allocation labels, the policy parser, the facts
// at decision time and the documentation all read it.
var AllocationAttrs = []AttrSpec{
	{AttrPartition, false, "partitions", false, []string{SchedulerSlurm}, "Slurm partition (squeue)", OwnerOperator, writersSlurm},
	{AttrQoS, false, "qos", false, []string{SchedulerSlurm}, "Slurm QoS (squeue)", OwnerOperator, writersSlurm},
	{AttrAccount, true, "accounts", false, []string{SchedulerSlurm}, "Slurm account (squeue)", OwnerOperator, writersSlurm},
	{AttrUser, true, "users", false, []string{SchedulerSlurm}, "Slurm job owner (squeue)", OwnerOperator, "the scheduler (the submitter's uid)"},
	{AttrJobName, true, "job_names", false, []string{SchedulerSlurm}, "Slurm job name (squeue)", OwnerWorkload, writersJobName},
	{AttrNamespace, false, "namespaces", false, []string{SchedulerKubernetes}, "pod namespace (API server)", OwnerOperator, writersKube},
	{AttrOwner, false, "owners", false, []string{SchedulerKubernetes}, "kind of the pod's controller, e.g. Job, ReplicaSet, StatefulSet (API server)", OwnerOperator, writersKube},
	{AttrTeam, true, "teams", false, []string{SchedulerSlurm, SchedulerKubernetes}, "team from the teams file (namespaces, accounts, users; then pod_label where the file names one) applied to the facts above", OwnerOperator, writersTeam},
	{AttrKind, true, "kinds", false, []string{SchedulerSlurm, SchedulerKubernetes}, "batch, interactive or service, from the teams file's kinds applied to the job or pod name", OwnerWorkload, writersKind},
	{AttrPodLabels, false, "labels", true, []string{SchedulerKubernetes}, "pod labels (API server)", OwnerWorkload, writersPod},
	{AttrPodAnnotations, false, "annotations", true, []string{SchedulerKubernetes}, "pod annotations (API server)", OwnerWorkload, writersPod},
	{AttrNamespaceLabels, false, "namespace_labels", true, []string{SchedulerKubernetes}, "labels of the pod's namespace (API server)", OwnerOperator, writersNSLabel},
	{AttrJob, true, "", false, nil, "hpc_job id, or namespace/pod", OwnerOperator, "the scheduler (job id), or the pod's author (pod name)"},
	{AttrScheduler, true, "", false, nil, "slurm or kubernetes", OwnerOperator, "gpuwatch"},
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
// value is "true" or an RFC 3339 time until which it holds. The pod's author
// writes it, so it counts only where the policy trusts it.
const ExemptKey = "gpuwatch.io/exempt"

// WorkloadOwned reports whether the allocation's author writes the
// attribute freely.
func (s AttrSpec) WorkloadOwned() bool { return s.Owner == OwnerWorkload }

// WorkloadMatchAttrs lists the attributes a policy may match that the
// workload writes, in documentation order.
func WorkloadMatchAttrs() []AttrSpec {
	var out []AttrSpec
	for _, s := range MatchAttrs() {
		if s.WorkloadOwned() {
			out = append(out, s)
		}
	}
	return out
}
