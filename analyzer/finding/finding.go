// Package finding defines what the analyzer concludes about one allocation:
// the waste pattern, who owns it, the GPU-hours lost, the evidence and the
// recommended action. Detectors produce findings; policy, actions and
// reports consume them.
package finding

import "time"

// Pattern is one of the waste patterns listed below.
type Pattern string

const (
	CPUOnly         Pattern = "cpu_only"
	OverRequested   Pattern = "over_requested"
	Stuck           Pattern = "stuck"
	StartupOverhead Pattern = "startup_overhead"
	IdleSession     Pattern = "idle_session"
	LowUtilization  Pattern = "low_utilization"
	Overlong        Pattern = "overlong"
	OrphanProcess   Pattern = "orphan_process"
)

// Patterns lists every pattern in a stable order.
var Patterns = []Pattern{CPUOnly, OverRequested, Stuck, StartupOverhead, IdleSession, LowUtilization, Overlong, OrphanProcess}

// Valid reports whether p is a known pattern.
func (p Pattern) Valid() bool {
	for _, q := range Patterns {
		if p == q {
			return true
		}
	}
	return false
}

// Severity of a finding.
type Severity string

const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Critical Severity = "critical"
)

// Action recommended for a finding (policy decides what is actually done).
type Action string

const (
	ActionNotify     Action = "notify"
	ActionWarn       Action = "warn"
	ActionCheckpoint Action = "checkpoint"
	ActionReclaim    Action = "reclaim"
	ActionKill       Action = "kill"   // orphaned process
	ActionResize     Action = "resize" // ask for fewer or smaller GPUs (MIG)
)

// Finding is one conclusion about one allocation.
type Finding struct {
	Pattern  Pattern  `json:"pattern"`
	Severity Severity `json:"severity"`
	// Job is the hpc_job id, or namespace/pod.
	Job       string `json:"job"`
	User      string `json:"user"`
	Team      string `json:"team"`
	Kind      string `json:"kind"`
	Hostname  string `json:"hostname"`
	Scheduler string `json:"scheduler,omitempty"` // slurm or kubernetes
	Account   string `json:"account,omitempty"`
	JobName   string `json:"job_name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Pod       string `json:"pod,omitempty"`
	ModelName string `json:"model,omitempty"`
	// GPUs holds the UUIDs of the allocation's GPUs (UUID/GI for MIG).
	GPUs           []string           `json:"gpus"`
	Start          time.Time          `json:"start"`
	End            time.Time          `json:"end"`
	WastedGPUHours float64            `json:"wasted_gpu_hours"`
	Evidence       map[string]float64 `json:"evidence"`
	Action         Action             `json:"action"`
	// Advice is a sentence for people (reports, notifications).
	Advice string `json:"advice,omitempty"`
	// PIDs of the orphaned processes (orphan_process only), and the command
	// each ran, which the kill checks again on the host.
	PIDs     []int          `json:"pids,omitempty"`
	Commands map[int]string `json:"commands,omitempty"`
}

// Key identifies a finding across cycles: the same allocation and pattern
// keep the same key (policy escalation and idempotency rely on it).
func (f *Finding) Key() string {
	return f.Hostname + "|" + f.Job + "|" + string(f.Pattern)
}
