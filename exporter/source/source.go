// Package source defines what a telemetry source reports: one Snapshot per
// collection, with the devices (GPUs and MIG instances), their samples, the
// GPU processes and, once attribution has run, who holds each GPU.
//
// A Source is the only thing that talks to the driver (NVML) or the
// simulator. The collector turns snapshots into Prometheus exposition; the
// attribution chain fills the ownership fields in between.
package source

import (
	"context"
	"strconv"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Source produces snapshots. Collect must honour ctx's deadline and must
// report a fault on one device or one field inside the snapshot (Device.Up,
// Snapshot.Errors) rather than failing the whole collection; an error return
// means nothing at all could be read.
type Source interface {
	// Name is "nvml" or "sim".
	Name() string
	Collect(ctx context.Context) (*Snapshot, error)
	Close() error
}

// Snapshot is everything read in one collection cycle.
type Snapshot struct {
	Time     time.Time
	Hostname string
	Devices  []Device
	// Processes holds every GPU process seen, per device.
	Processes []Process
	// Allocations says who holds which device. The simulator fills it; for
	// real GPUs the attribution chain does.
	Allocations []Allocation
	// JobCPU holds CPU seconds per job that holds a GPU on this node.
	JobCPU []JobCPU
	// Errors lists the faults of this cycle; each is counted once per field.
	Errors []FieldError
}

// MIG identifies a MIG GPU instance on its parent GPU.
type MIG struct {
	Profile string // e.g. "1g.10gb" (GPU_I_PROFILE)
	GIID    int    // GPU instance id (GPU_I_ID)
	CIID    int    // compute instance id, -1 when unknown
}

// Device is one physical GPU, or one MIG GPU instance when MIG is non-nil
// (then Index, UUID and PCIBusID are the parent's, as dcgm-exporter labels them).
type Device struct {
	Index    int
	UUID     string
	PCIBusID string
	Model    string
	MIG      *MIG
	// Up is false when the device is lost (ERROR_GPU_IS_LOST, fell off the bus).
	Up bool
	// Capabilities lists the telemetry sources this device has ("nvml", "gpm", "sim").
	Capabilities []string
	Samples      []Sample
	// ProcessUse is true when the source read each process's own use of this
	// device this cycle (Process.Use); a process without Use was idle. False
	// where the driver cannot (MIG instances, old drivers) or the read
	// failed: then no holder's own use is known.
	ProcessUse bool
}

// Key identifies a device or MIG instance: "<UUID>" or "<UUID>/<GIID>".
func (d *Device) Key() string { return DeviceKey(d.UUID, d.MIG) }

// DeviceKey builds the key of Device.Key.
func DeviceKey(uuid string, mig *MIG) string {
	if mig == nil {
		return uuid
	}
	return uuid + "/" + strconv.Itoa(mig.GIID)
}

// Sample is one value of one metric for a device. LabelValues holds the
// values of the metric's extra labels (schema.Metric.Labels), in order.
type Sample struct {
	Metric      *schema.Metric
	LabelValues []string
	Value       float64
}

// ProcessType is "compute" or "graphics".
type ProcessType string

const (
	Compute  ProcessType = "compute"
	Graphics ProcessType = "graphics"
)

// Process is a process holding memory on a device.
type Process struct {
	DeviceKey   string // Device.Key() of the device it runs on
	PID         int
	Type        ProcessType
	MemoryBytes uint64
	// Filled by attribution (or by the simulator).
	Command string
	User    string
	UID     int
	Job     string // hpc_job id, or namespace/pod
	Orphan  bool   // holds GPU memory with no live allocation
	// Use is the process's own use of the device's engines since the last
	// collection; nil when it had no sample (idle) or the source cannot tell
	// (see Device.ProcessUse).
	Use *ProcessUse
}

// ProcessUse is one process's share of a device's engines over the last
// sampling window, in percent (0-100) as NVML's per-process utilization
// reports it.
type ProcessUse struct {
	SM, Memory, Encoder, Decoder float64
}

// Allocation is one holder of one device. A shared GPU (time-slicing, MPS)
// has several.
type Allocation struct {
	DeviceKey string
	Scheduler string // schema.SchedulerSlurm or schema.SchedulerKubernetes
	// Kubernetes
	Pod, Namespace, Container string
	// Batch
	HPCJob string
	// Both
	User, Account, Team, Kind, JobName string
	Labels                             map[string]string // pod labels and annotations, for exemptions
	Start                              time.Time         // when known
}

// Attributes describes the holder in the schema's terms, as
// gpuwatch_allocation_info publishes it. Labels stays out: it mixes the pod's
// labels and annotations, which the exporter never publishes.
func (a *Allocation) Attributes() schema.Allocation {
	return schema.Allocation{Scheduler: a.Scheduler, Job: a.JobID(), User: a.User, Team: a.Team, Kind: a.Kind,
		Account: a.Account, JobName: a.JobName, Namespace: a.Namespace}
}

// JobID is the job identity used across gpuwatch: the hpc_job id, or
// namespace/pod for Kubernetes.
func (a *Allocation) JobID() string {
	if a.HPCJob != "" {
		return a.HPCJob
	}
	if a.Pod != "" {
		return a.Namespace + "/" + a.Pod
	}
	return ""
}

// JobCPU is the CPU time of one job on this node.
type JobCPU struct {
	Job     string
	Seconds float64
}

// FieldError is one fault: which device (key, may be empty for global
// faults), which field (a short name such as "utilization" or "ecc"), and
// the error.
type FieldError struct {
	DeviceKey string
	Field     string
	Err       error
}

func (e FieldError) Error() string {
	if e.DeviceKey == "" {
		return e.Field + ": " + e.Err.Error()
	}
	return e.DeviceKey + ": " + e.Field + ": " + e.Err.Error()
}

// Attributor fills the ownership fields of a snapshot (Allocations,
// Process.Command/User/Job/Orphan, JobCPU). It must never block on a remote
// service: it works from state refreshed in the background.
type Attributor interface {
	Attribute(snap *Snapshot)
}

// Clock is the time source; the simulator and tests inject their own.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

func (SystemClock) Now() time.Time { return time.Now() }
