// The metric catalogue: every metric gpuwatch publishes or reads, with its
// name, type, unit, help and where its value comes from. The collector, the
// simulator, the dashboards, the rules and the docs all take names from here,
// so no metric name is spelled twice in the code base.
//
// GPU series keep dcgm-exporter's names, units and label names so existing
// dashboards and alerts work unchanged; everything dcgm-exporter lacks is named
// gpuwatch_* and follows Prometheus naming conventions.

package schema

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Type is the Prometheus metric type.
type Type string

const (
	Gauge     Type = "gauge"
	Counter   Type = "counter"
	Histogram Type = "histogram"
)

// Origin says which part of gpuwatch produces a metric.
type Origin string

const (
	OriginNVML        Origin = "nvml"        // read from the driver through NVML
	OriginGPM         Origin = "gpm"         // NVML GPU Performance Monitoring (Hopper and newer)
	OriginAttribution Origin = "attribution" // kubelet, job map, /proc and cgroups
	OriginExporter    Origin = "exporter"    // the exporter's own health
	OriginAnalyzer    Origin = "analyzer"    // the analyzer daemon
	OriginBuild       Origin = "build"       // the running binary itself (exporter and analyzer)
)

// Label names of the metric contract: dcgm-exporter's where it has them.
const (
	LabelGPU       = "gpu"
	LabelUUID      = "UUID"
	LabelPCIBusID  = "pci_bus_id"
	LabelDevice    = "device"
	LabelModelName = "modelName"
	LabelHostname  = "hostname"
	LabelOldHost   = "Hostname" // older dcgm-exporter releases; the analyzer accepts both
	LabelGIProfile = "GPU_I_PROFILE"
	LabelGIID      = "GPU_I_ID"
	LabelPod       = "pod"
	LabelNamespace = "namespace"
	LabelContainer = "container"
	LabelHPCJob    = "hpc_job"
	// LabelVGPU is the time-slicing replica a series' pod holds, on
	// dcgm-exporter's per-replica copies of a device's series
	// (KUBERNETES_VIRTUAL_GPUS): every copy carries the device's totals.
	LabelVGPU       = "vgpu"
	LabelReason     = "reason"
	LabelXID        = "xid"
	LabelField      = "field"
	LabelPID        = "pid"
	LabelCommand    = "command"
	LabelUser       = "user"
	LabelJob        = "job_id"
	LabelTeam       = "team"
	LabelKind       = "kind"
	LabelAccount    = "account"
	LabelJobName    = "job_name"
	LabelScheduler  = "scheduler"
	LabelProcType   = "type"
	LabelSource     = "source"
	LabelPattern    = "pattern"
	LabelAction     = "action"
	LabelResult     = "result"
	LabelAttributor = "attributor"
	LabelLabel      = "label" // the label a truncation counter counts
	LabelVersion    = "version"
	LabelRevision   = "revision"
	LabelBranch     = "branch"
	LabelGoVersion  = "goversion"
	LabelGoOS       = "goos"
	LabelGoArch     = "goarch"
)

// LabelCluster is not the exporter's: Prometheus adds it (external labels,
// relabelling) where one holds several clusters' series.
const LabelCluster = "cluster"

// GPULabels are carried by every per-GPU series, in this order. MIG instances
// add LabelGIProfile and LabelGIID; allocated GPUs add the allocation labels.
var GPULabels = []string{LabelGPU, LabelUUID, LabelPCIBusID, LabelDevice, LabelModelName, LabelHostname}

// AllocationLabels are the dcgm-exporter labels a GPU series carries while it is
// allocated: pod/namespace/container for Kubernetes, hpc_job for batch schedulers.
var AllocationLabels = []string{LabelPod, LabelNamespace, LabelContainer, LabelHPCJob}

// Metric describes one metric family.
type Metric struct {
	Name   string
	Type   Type
	Unit   string // human unit as published ("%", "MiB", "W", "mJ", "ns", "bytes", "seconds", "ratio", "")
	Help   string
	Origin Origin
	// PerGPU is true for series that carry GPULabels (and MIG and allocation labels).
	PerGPU bool
	// Labels are the extra label names beyond the GPU labels, in order.
	Labels []string
	// DCGM is true for names inherited from dcgm-exporter, whose lint exceptions
	// (camelCase labels, counters without _total) are accepted.
	DCGM bool
	// Buckets for histograms.
	Buckets []float64
}

func (m *Metric) String() string { return m.Name }

var all []*Metric

func def(m Metric) *Metric {
	for _, o := range all {
		if o.Name == m.Name {
			panic(fmt.Sprintf("schema: metric %s defined twice", m.Name))
		}
	}
	p := &m
	all = append(all, p)
	return p
}

func dcgm(name string, t Type, unit, help string, origin Origin) *Metric {
	return def(Metric{Name: name, Type: t, Unit: unit, Help: help, Origin: origin, PerGPU: true, DCGM: true})
}

// All returns every metric in catalogue order. The slice must not be modified.
func All() []*Metric { return all }

// Lookup returns the metric with the given name.
func Lookup(name string) (*Metric, bool) {
	for _, m := range all {
		if m.Name == name {
			return m, true
		}
	}
	return nil, false
}

// dcgm-exporter compatible GPU metrics (values from NVML).
var (
	GPUUtil        = dcgm("DCGM_FI_DEV_GPU_UTIL", Gauge, "%", "GPU utilization (in %).", OriginNVML)
	MemCopyUtil    = dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", Gauge, "%", "Memory utilization (in %).", OriginNVML)
	EncUtil        = dcgm("DCGM_FI_DEV_ENC_UTIL", Gauge, "%", "Encoder utilization (in %).", OriginNVML)
	DecUtil        = dcgm("DCGM_FI_DEV_DEC_UTIL", Gauge, "%", "Decoder utilization (in %).", OriginNVML)
	FBUsed         = dcgm("DCGM_FI_DEV_FB_USED", Gauge, "MiB", "Framebuffer memory used (in MiB).", OriginNVML)
	FBFree         = dcgm("DCGM_FI_DEV_FB_FREE", Gauge, "MiB", "Framebuffer memory free (in MiB).", OriginNVML)
	FBReserved     = dcgm("DCGM_FI_DEV_FB_RESERVED", Gauge, "MiB", "Framebuffer memory reserved by the driver (in MiB).", OriginNVML)
	GPUTemp        = dcgm("DCGM_FI_DEV_GPU_TEMP", Gauge, "C", "GPU temperature (in C).", OriginNVML)
	MemoryTemp     = dcgm("DCGM_FI_DEV_MEMORY_TEMP", Gauge, "C", "Memory temperature (in C).", OriginNVML)
	PowerUsage     = dcgm("DCGM_FI_DEV_POWER_USAGE", Gauge, "W", "Power draw (in W).", OriginNVML)
	PowerLimit     = dcgm("DCGM_FI_DEV_POWER_MGMT_LIMIT", Gauge, "W", "Power management limit (in W).", OriginNVML)
	TotalEnergy    = dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", Counter, "mJ", "Total energy consumption since boot (in mJ).", OriginNVML)
	SMClock        = dcgm("DCGM_FI_DEV_SM_CLOCK", Gauge, "MHz", "SM clock frequency (in MHz).", OriginNVML)
	MemClock       = dcgm("DCGM_FI_DEV_MEM_CLOCK", Gauge, "MHz", "Memory clock frequency (in MHz).", OriginNVML)
	ClockEvents    = dcgm("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", Gauge, "bitmask", "Current clock event (throttle) reasons, NVML bitmask.", OriginNVML)
	PowerViolation = dcgm("DCGM_FI_DEV_POWER_VIOLATION", Counter, "ns", "Throttling duration due to power constraints (in ns).", OriginNVML)
	ThermViolation = dcgm("DCGM_FI_DEV_THERMAL_VIOLATION", Counter, "ns", "Throttling duration due to thermal constraints (in ns).", OriginNVML)
	XIDLast        = dcgm("DCGM_FI_DEV_XID_ERRORS", Gauge, "", "Value of the last XID error encountered.", OriginNVML)
	ECCSBEVol      = dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", Counter, "", "Total number of single-bit volatile ECC errors.", OriginNVML)
	ECCDBEVol      = dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", Counter, "", "Total number of double-bit volatile ECC errors.", OriginNVML)
	ECCSBEAgg      = dcgm("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", Counter, "", "Total number of single-bit persistent ECC errors.", OriginNVML)
	ECCDBEAgg      = dcgm("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", Counter, "", "Total number of double-bit persistent ECC errors.", OriginNVML)
	RetiredSBE     = dcgm("DCGM_FI_DEV_RETIRED_SBE", Counter, "", "Total number of retired pages due to single-bit errors.", OriginNVML)
	RetiredDBE     = dcgm("DCGM_FI_DEV_RETIRED_DBE", Counter, "", "Total number of retired pages due to double-bit errors.", OriginNVML)
	RetiredPending = dcgm("DCGM_FI_DEV_RETIRED_PENDING", Gauge, "", "Number of pages pending retirement.", OriginNVML)
	RemapCorr      = dcgm("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", Counter, "", "Number of remapped rows for correctable errors.", OriginNVML)
	RemapUncorr    = dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", Counter, "", "Number of remapped rows for uncorrectable errors.", OriginNVML)
	RemapFailure   = dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", Gauge, "", "Whether remapping of rows has failed (1) or not (0).", OriginNVML)
	RemapPending   = dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", Gauge, "", "Whether a row remap is pending a GPU reset (1) or not (0).", OriginNVML)
	PCIeReplay     = dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", Counter, "", "Total number of PCIe retries.", OriginNVML)
	NVLinkBW       = dcgm("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", Counter, "", "Total number of NVLink bandwidth counters for all lanes.", OriginNVML)
	NVLinkCRCFlit  = dcgm("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", Counter, "", "Total number of NVLink flow-control CRC errors.", OriginNVML)
	NVLinkCRCData  = dcgm("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", Counter, "", "Total number of NVLink data CRC errors.", OriginNVML)
	NVLinkReplay   = dcgm("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", Counter, "", "Total number of NVLink retries.", OriginNVML)
	NVLinkRecovery = dcgm("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", Counter, "", "Total number of NVLink recovery errors.", OriginNVML)
)

// Profiling metrics under DCGM's names, as ratios 0-1. gpuwatch computes them
// from NVML GPM samples (Hopper and newer) or the simulator; a device without
// the source publishes none of them.
var (
	ProfGrEngineActive = dcgm("DCGM_FI_PROF_GR_ENGINE_ACTIVE", Gauge, "ratio", "Ratio of time the graphics engine is active.", OriginGPM)
	ProfSMActive       = dcgm("DCGM_FI_PROF_SM_ACTIVE", Gauge, "ratio", "The ratio of cycles an SM has at least 1 warp assigned.", OriginGPM)
	ProfSMOccupancy    = dcgm("DCGM_FI_PROF_SM_OCCUPANCY", Gauge, "ratio", "The ratio of number of warps resident on an SM.", OriginGPM)
	ProfTensorActive   = dcgm("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", Gauge, "ratio", "Ratio of cycles the tensor (HMMA) pipe is active.", OriginGPM)
	ProfDRAMActive     = dcgm("DCGM_FI_PROF_DRAM_ACTIVE", Gauge, "ratio", "Ratio of cycles the device memory interface is active sending or receiving data.", OriginGPM)
	ProfFP64Active     = dcgm("DCGM_FI_PROF_PIPE_FP64_ACTIVE", Gauge, "ratio", "Ratio of cycles the fp64 pipes are active.", OriginGPM)
	ProfFP32Active     = dcgm("DCGM_FI_PROF_PIPE_FP32_ACTIVE", Gauge, "ratio", "Ratio of cycles the fp32 pipes are active.", OriginGPM)
	ProfFP16Active     = dcgm("DCGM_FI_PROF_PIPE_FP16_ACTIVE", Gauge, "ratio", "Ratio of cycles the fp16 pipes are active.", OriginGPM)
	ProfPCIeTX         = dcgm("DCGM_FI_PROF_PCIE_TX_BYTES", Gauge, "bytes/s", "The rate of data transmitted over the PCIe bus, including protocol headers (bytes per second).", OriginGPM)
	ProfPCIeRX         = dcgm("DCGM_FI_PROF_PCIE_RX_BYTES", Gauge, "bytes/s", "The rate of data received over the PCIe bus, including protocol headers (bytes per second).", OriginGPM)
	ProfNVLinkTX       = dcgm("DCGM_FI_PROF_NVLINK_TX_BYTES", Gauge, "bytes/s", "The rate of data transmitted over NVLink, not including protocol headers (bytes per second).", OriginGPM)
	ProfNVLinkRX       = dcgm("DCGM_FI_PROF_NVLINK_RX_BYTES", Gauge, "bytes/s", "The rate of data received over NVLink, not including protocol headers (bytes per second).", OriginGPM)
)

// gpuwatch's own per-GPU metrics.
var (
	GPUUp = def(Metric{Name: "gpuwatch_gpu_up", Type: Gauge, Origin: OriginNVML, PerGPU: true,
		Help: "1 if the GPU answered the last collection, 0 if it is lost or fell off the bus."})
	ClockEventActive = def(Metric{Name: "gpuwatch_clock_event_reason_active", Type: Gauge, Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelReason},
		Help:   "1 while the named clock event (throttle) reason is active, else 0; one series per reason of DCGM_FI_DEV_CLOCKS_EVENT_REASONS."})
	XIDErrors = def(Metric{Name: "gpuwatch_xid_errors_total", Type: Counter, Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelXID},
		Help:   "XID errors reported by the driver since the exporter started, by XID code."})
	ProcessMemory = def(Metric{Name: "gpuwatch_process_gpu_memory_bytes", Type: Gauge, Unit: "bytes", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelPID, LabelCommand, LabelUser, LabelJob, LabelProcType},
		Help:   "GPU memory used by a process, with its command, user and job (hpc_job id or namespace/pod)."})
	ProcessOrphaned = def(Metric{Name: "gpuwatch_process_orphaned", Type: Gauge, Origin: OriginAttribution, PerGPU: true,
		Labels: []string{LabelPID, LabelCommand, LabelUser, LabelJob},
		Help:   "1 for a GPU process that belongs to no live allocation (its job ended or it was never scheduled)."})
	AllocationInfo = def(Metric{Name: "gpuwatch_allocation_info", Type: Gauge, Origin: OriginAttribution, PerGPU: true,
		Labels: []string{LabelJob, LabelUser, LabelTeam, LabelKind, LabelAccount, LabelJobName, LabelScheduler},
		Help:   "1 for each holder of a GPU: job, user, team, kind (batch, interactive, service) and scheduler. Shared GPUs list every holder."})
	JobCPUSeconds = def(Metric{Name: "gpuwatch_job_cpu_seconds_total", Type: Counter, Unit: "seconds", Origin: OriginAttribution,
		Labels: []string{LabelHostname, LabelJob},
		Help:   "CPU time consumed by a job holding a GPU, from its cgroup (cpu.stat or cpuacct.usage)."})
	Capabilities = def(Metric{Name: "gpuwatch_exporter_capabilities", Type: Gauge, Origin: OriginExporter, PerGPU: true,
		Labels: []string{LabelSource},
		Help: "1 for each telemetry source a device has (nvml, gpm, sim, process_utilization). A device without " +
			"process_utilization (MIG, old drivers) publishes no gpuwatch_holder_* series: its holders' own use is unknown."})
)

// CapabilityProcessUtilization is the gpuwatch_exporter_capabilities source of
// a device whose holders' own use was read this cycle (NVML's per-process
// utilization, or the simulator's): only such a device has gpuwatch_holder_*
// series.
const CapabilityProcessUtilization = "process_utilization"

// Per-holder use of a device: NVML's per-process figures summed per holder
// (a pod, namespace/pod, or a batch job, hpc_job) and device, never per PID,
// so a shared GPU (time-slicing, MPS) shows each tenant's own use. Published
// only for devices with the process_utilization capability; every holder of
// such a device has all five, 0 when none of its processes used the engine.
// Labels: the GPU labels (no modelName), pod and namespace or hpc_job of the
// holder where an allocation names it, and job_id.
var (
	HolderSMUtil = def(Metric{Name: "gpuwatch_holder_sm_utilization_ratio", Type: Gauge, Unit: "ratio", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelJob},
		Help:   "Share of the device's SM time used by one holder's processes (0-1), summed over its processes; NVML per-process utilization."})
	HolderMemUtil = def(Metric{Name: "gpuwatch_holder_memory_utilization_ratio", Type: Gauge, Unit: "ratio", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelJob},
		Help:   "Share of the device's memory-interface time used by one holder's processes (0-1); NVML per-process utilization."})
	HolderEncUtil = def(Metric{Name: "gpuwatch_holder_encoder_utilization_ratio", Type: Gauge, Unit: "ratio", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelJob},
		Help:   "Share of the device's video encoder time used by one holder's processes (0-1); NVML per-process utilization."})
	HolderDecUtil = def(Metric{Name: "gpuwatch_holder_decoder_utilization_ratio", Type: Gauge, Unit: "ratio", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelJob},
		Help:   "Share of the device's video decoder time used by one holder's processes (0-1); NVML per-process utilization."})
	HolderMemory = def(Metric{Name: "gpuwatch_holder_gpu_memory_bytes", Type: Gauge, Unit: "bytes", Origin: OriginNVML, PerGPU: true,
		Labels: []string{LabelJob},
		Help:   "GPU memory held by one holder's processes on the device, summed over its processes."})
)

// HolderUseMetrics are the per-holder series, in the order render writes them.
var HolderUseMetrics = []*Metric{HolderSMUtil, HolderMemUtil, HolderEncUtil, HolderDecUtil, HolderMemory}

// The exporter's own health.
var (
	CollectErrors = def(Metric{Name: "gpuwatch_exporter_collect_errors_total", Type: Counter, Origin: OriginExporter,
		Labels: []string{LabelField},
		Help:   "Faults while reading a field from the telemetry source, by field."})
	LastCollect = def(Metric{Name: "gpuwatch_exporter_last_collect_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginExporter,
		Help: "Unix time of the last successful collection."})
	CollectDuration = def(Metric{Name: "gpuwatch_exporter_collect_duration_seconds", Type: Histogram, Unit: "seconds", Origin: OriginExporter,
		Help:    "Time taken by one collection cycle.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}})
	LabelsTruncated = def(Metric{Name: "gpuwatch_exporter_label_values_truncated_total", Type: Counter, Origin: OriginExporter,
		Labels: []string{LabelLabel},
		Help:   "Label values cut to the exporter's length limit (MaxLabelValueBytes), by label name; a joined list of holders keeps whole ids and ends in ,+N."})
	HoldersDropped = def(Metric{Name: "gpuwatch_exporter_holders_dropped_total", Type: Counter, Origin: OriginExporter,
		Help: "Holders of a device left out of the gpuwatch_holder_* series because the device had more than the per-device cap (MaxHoldersPerDevice), summed over collections."})
	AttributionErrors = def(Metric{Name: "gpuwatch_attribution_errors_total", Type: Counter, Origin: OriginAttribution,
		Labels: []string{LabelAttributor},
		Help:   "Failed refreshes of an attribution source (kubelet, job map, proc)."})
	AttributionLastRefresh = def(Metric{Name: "gpuwatch_attribution_last_refresh_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAttribution,
		Labels: []string{LabelAttributor},
		Help:   "Unix time of the last good refresh of an attribution source."})
)

// BuildInfo is published by the exporter and the analyzer daemon alike; its
// labels are those of client_golang's version collector.
var BuildInfo = def(Metric{Name: "gpuwatch_build_info", Type: Gauge, Origin: OriginBuild,
	Labels: []string{LabelVersion, LabelRevision, LabelBranch, LabelGoVersion, LabelGoOS, LabelGoArch},
	Help:   "1, labelled with the version, VCS revision, branch and Go toolchain of the running gpuwatch build."})

// CounterVec builds a client_golang counter for a metric of this catalogue.
func (m *Metric) CounterVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

// Counter builds an unlabelled client_golang counter.
func (m *Metric) Counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: m.Name, Help: m.Help})
}

// GaugeVec builds a client_golang gauge for a metric of this catalogue.
func (m *Metric) GaugeVec() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

// Gauge builds an unlabelled client_golang gauge.
func (m *Metric) Gauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help})
}

// HistogramVec builds a client_golang histogram with the catalogue's buckets.
func (m *Metric) HistogramVec() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: m.Buckets}, m.Labels)
}

// Histogram builds an unlabelled client_golang histogram with the catalogue's buckets.
func (m *Metric) Histogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: m.Name, Help: m.Help, Buckets: m.Buckets})
}
