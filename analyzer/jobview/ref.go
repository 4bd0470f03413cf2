package jobview

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Ref names a job: a Slurm job id (hpc_job), or a Kubernetes namespace/pod.
type Ref struct {
	Slurm          string
	Namespace, Pod string
	// exported: the pod's series name it in exported_namespace and
	// exported_pod, as Prometheus renames dcgm-exporter's holder labels
	// when it scrapes with honor_labels: false (namespace and pod are then
	// the exporter's own). Build learns it from the data.
	exported bool
}

var (
	slurmID  = regexp.MustCompile(`^[0-9]{1,12}(_[0-9]{1,12})?$`)
	k8sName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	maxNSLen = 63
)

// ParseRef reads a job reference as users type it.
func ParseRef(s string) (Ref, error) {
	if slurmID.MatchString(s) {
		return Ref{Slurm: s}, nil
	}
	ns, pod, ok := strings.Cut(s, "/")
	if ok && len(ns) <= maxNSLen && k8sName.MatchString(ns) && k8sName.MatchString(pod) {
		return Ref{Namespace: ns, Pod: pod}, nil
	}
	return Ref{}, fmt.Errorf("job %q: want a Slurm job id (1234 or 1234_5) or namespace/pod", s)
}

// String is the job id as the analyzer's findings spell it.
func (r Ref) String() string {
	if r.Slurm != "" {
		return r.Slurm
	}
	return r.Namespace + "/" + r.Pod
}

// Selector returns the label matchers that pick the job's GPU series:
// those it holds alone, and those of a GPU it shares (time-slicing, MPS),
// whose label lists every holder joined with commas.
func (r Ref) Selector() string {
	if r.Slurm != "" {
		return "{" + listed(schema.LabelHPCJob, r.Slurm) + "}"
	}
	ns, pod := schema.LabelNamespace, schema.LabelPod
	if r.exported {
		ns, pod = features.ExportedPrefix+ns, features.ExportedPrefix+pod
	}
	return "{" + listed(ns, r.Namespace) + "," + listed(pod, r.Pod) + "}"
}

// JobSelector picks the job's series that name it by job_id
// (gpuwatch_allocation_info, gpuwatch_job_cpu_seconds_total).
func (r Ref) JobSelector() string { return "{" + eq(schema.LabelJob, r.String()) + "}" }

func eq(name, value string) string {
	return labels.MustNewMatcher(labels.MatchEqual, name, value).String()
}

// listed matches a label whose value is value, or a comma-joined list of
// holders that names value as one of its items (never as part of one:
// job 12 is not in "123,7").
func listed(name, value string) string {
	return labels.MustNewMatcher(labels.MatchRegexp, name, "(?:.*,)?"+regexp.QuoteMeta(value)+"(?:,.*)?").String()
}
