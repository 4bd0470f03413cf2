// Package finding defines what the analyzer concludes about one allocation:
// the waste pattern (schema.Pattern), who owns it, the GPU-hours lost, the evidence and the
// recommended action. Detectors produce findings; policy, actions and
// reports consume them.
package finding

import (
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// EvidenceUnknown is the evidence key of a finding carried over a gap: its
// allocation had no data at the latest step, so its clocks are paused and
// nothing may act on it until the data is back.
const EvidenceUnknown = "unknown"

// Finding is one conclusion about one allocation.
type Finding struct {
	Pattern  schema.Pattern  `json:"pattern"`
	Severity schema.Severity `json:"severity"`
	// Job is the hpc_job id, or namespace/pod.
	Job  string `json:"job"`
	User string `json:"user"`
	Team string `json:"team"`
	Kind string `json:"kind"`
	// KindSource says what decided Kind: the workload's owner ("owner
	// Notebook kubeflow.org/v1 research/nb-1", "Slurm batch flag") or its
	// names ("name"), the last resort.
	KindSource string `json:"kind_source,omitempty"`
	Hostname   string `json:"hostname"`
	Scheduler  string `json:"scheduler,omitempty"` // slurm or kubernetes
	Account    string `json:"account,omitempty"`
	JobName    string `json:"job_name,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Pod        string `json:"pod,omitempty"`
	ModelName  string `json:"model,omitempty"`
	// GPUs holds the UUIDs of the allocation's GPUs (UUID/GI for MIG).
	GPUs []string `json:"gpus"`
	// GPU is the one GPU a health finding (straggler, gpu_fault, app_xid)
	// is about: its UUID.
	GPU            string             `json:"gpu,omitempty"`
	Start          time.Time          `json:"start"`
	End            time.Time          `json:"end"`
	WastedGPUHours float64            `json:"wasted_gpu_hours"`
	Evidence       map[string]float64 `json:"evidence"`
	Action         schema.Action      `json:"action"`
	// Advice is a sentence for people (reports, notifications).
	Advice string `json:"advice,omitempty"`
	// PIDs of the orphaned processes (orphan_process only), and the command
	// each ran, which the kill checks again on the host.
	PIDs     []int          `json:"pids,omitempty"`
	Commands map[int]string `json:"commands,omitempty"`
	// Cluster is the cluster label of the evidence's series, "" where they
	// carry none: a job id is an id only within its cluster.
	Cluster string `json:"cluster,omitempty"`
}

// Key identifies a finding across cycles: the same allocation and pattern
// keep the same key (policy escalation and idempotency rely on it).
func (f *Finding) Key() string {
	return f.Hostname + "|" + f.Job + "|" + string(f.Pattern)
}
