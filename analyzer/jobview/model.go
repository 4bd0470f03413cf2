package jobview

import (
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// Scheduler facts about a job, when the scheduler still knows it. They win
// over what the telemetry suggests (state, owner), and the CPUs it was given
// turn CPU time into an efficiency.
type Scheduler struct {
	// ID is the scheduler's own id of the job.
	ID      string
	State   string
	User    string
	Account string
	Name    string
	CPUs    int
	Start   time.Time
	End     time.Time
	// AdminComment is the job's AdminComment, where the end-of-job summary lives.
	AdminComment string
}

// Options of Build.
type Options struct {
	Querier query.Querier
	Config  config.Config
	Now     time.Time
	// Lookback bounds the search for the job's series (default 30 days).
	Lookback time.Duration
	// Points is the number of points of each sparkline (default 40).
	Points int
	// Scheduler holds what Slurm says of the job, when it was asked.
	Scheduler *Scheduler
}

// Report is the job view. Its JSON form is documented in docs/job.md.
type Report struct {
	Job       string `json:"job"`
	Scheduler string `json:"scheduler"`
	Hostname  string `json:"hostname"`
	User      string `json:"user"`
	Team      string `json:"team"`
	Account   string `json:"account,omitempty"`
	JobName   string `json:"job_name,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// State is Slurm's job state when Slurm was asked, else running or
	// ended as the telemetry shows it.
	State string    `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Window is the range, in PromQL, over which every figure was taken:
	// the instant queries run at End over [Window].
	Window        string   `json:"window"`
	DurationHours float64  `json:"duration_hours"`
	Models        []string `json:"models"`
	GPUs          []GPU    `json:"gpus"`
	CPU           *CPU     `json:"cpu,omitempty"`
	// Coverage is the share of the job's span its samples cover, each GPU
	// judged against its own scrape interval, for the least covered GPU
	// (1 = no gap).
	Coverage float64 `json:"coverage"`
	// NotEnoughData says why the figures cannot be trusted, when they cannot.
	NotEnoughData string    `json:"not_enough_data,omitempty"`
	Findings      []Finding `json:"findings"`
	Totals        Totals    `json:"totals"`
	// Tenants are the holders of the job's GPUs, the job among them, when
	// it shared them with others: each one's share and what it used.
	Tenants []Tenant `json:"tenants,omitempty"`
	// Health says which of the health signals (docs/health.md) the job's
	// series carry, and whether the job ended of a GPU fault.
	Health *Health `json:"health,omitempty"`
	// Source is where the figures come from: query (Prometheus or the
	// embedded store) or admin_comment (the end-of-job summary).
	Source string `json:"source"`
	// Note explains a summary that could not be made at the job's end.
	Note string `json:"note,omitempty"`
}

// GPU is one device (or MIG instance) of the job. Absent figures are null.
type GPU struct {
	Device     string `json:"device"`
	UUID       string `json:"uuid"`
	Index      string `json:"gpu"`
	Model      string `json:"model"`
	MIGProfile string `json:"mig_profile,omitempty"`
	Samples    int    `json:"samples"`
	// Utilization in percent (DCGM_FI_DEV_GPU_UTIL).
	UtilMean *float64 `json:"util_mean_percent"`
	UtilPeak *float64 `json:"util_peak_percent"`
	// SM activity as a ratio 0-1 (DCGM_FI_PROF_SM_ACTIVE), where exported.
	SMActiveMean *float64 `json:"sm_active_mean"`
	SMActivePeak *float64 `json:"sm_active_peak"`
	// Memory in MiB: the peak used and the device's total (peak used plus
	// the least free), and their ratio.
	MemPeakMiB   *float64 `json:"memory_peak_mib"`
	MemTotalMiB  *float64 `json:"memory_total_mib"`
	MemPeakShare *float64 `json:"memory_peak_share"`
	PowerMeanW   *float64 `json:"power_mean_watts"`
	// EnergyKWh is the increase of the energy counter, else mean power
	// times duration (EnergyFrom says which).
	EnergyKWh  *float64 `json:"energy_kwh"`
	EnergyFrom string   `json:"energy_from,omitempty"`
	Coverage   float64  `json:"coverage"`
	// Sparklines: per-interval mean utilization (percent) and peak memory
	// (MiB), SparkStep apart, ending at the job's end.
	SparkUtil []*float64 `json:"spark_util_percent,omitempty"`
	SparkMem  []*float64 `json:"spark_memory_mib,omitempty"`
	SparkStep string     `json:"spark_step,omitempty"`
}

// CPU is the job's CPU use from its cgroup (gpuwatch_job_cpu_seconds_total).
type CPU struct {
	Seconds   float64 `json:"seconds"`
	MeanCores float64 `json:"mean_cores"`
	// Allocated and Efficiency are set when the scheduler said how many
	// CPUs the job had.
	Allocated  int      `json:"allocated,omitempty"`
	Efficiency *float64 `json:"efficiency,omitempty"`
}

// Finding is an analyzer finding on the job, with the advice reports give.
type Finding struct {
	finding.Finding
	// Detail is the detector's own sentence; Advice is the change that
	// would have avoided the waste.
	Detail string `json:"detail,omitempty"`
}

// Totals of the job.
type Totals struct {
	// GPUHours is what the job held: its GPUs times its span, each GPU by
	// the job's share of it as the accounting splits a time-sliced GPU
	// between its holders (so that four notebooks on one GPU hold its
	// hours once between them).
	GPUHours       float64 `json:"gpu_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	// DegradedGPUHours: slowed by throttled or faulty GPUs (the
	// accounting's degraded total), never waste.
	DegradedGPUHours float64 `json:"degraded_gpu_hours"`
	EnergyKWh        float64 `json:"energy_kwh"`
}
