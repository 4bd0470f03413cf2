package sim

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Behaviour names a workload's GPU usage over time.
type Behaviour string

// Behaviours (see doc.go for what each one does and its parameters).
const (
	Training       Behaviour = "training"
	BurstyTraining Behaviour = "bursty_training"
	InferenceDaily Behaviour = "inference_daily"
	CPUOnly        Behaviour = Behaviour(schema.CPUOnly)
	HungCollective Behaviour = "hung_collective"
	NCCLHang       Behaviour = "nccl_hang"
	SmallBatch     Behaviour = "small_batch_inference"
	StuckIdle      Behaviour = "stuck_idle"
	IdleNotebook   Behaviour = "idle_notebook"
	Notebook       Behaviour = "notebook"
	StartupDelay   Behaviour = "startup_delay"
	LowUtil        Behaviour = "low_util"
	PartialGPUs    Behaviour = "partial_gpus"
	Overlong       Behaviour = Behaviour(schema.Overlong)
	Orphan         Behaviour = "orphan"
)

var behaviours = []Behaviour{Training, BurstyTraining, InferenceDaily, CPUOnly, HungCollective, NCCLHang, SmallBatch,
	StuckIdle, IdleNotebook, Notebook, StartupDelay, LowUtil, PartialGPUs, Overlong, Orphan}

// FaultKind names a hardware fault.
type FaultKind string

// Fault kinds.
const (
	ThermalThrottle FaultKind = "thermal_throttle"
	PowerThrottle   FaultKind = "power_throttle"
	XID             FaultKind = "xid"
	ECCDBE          FaultKind = "ecc_dbe"
	RowRemapFailure FaultKind = "row_remap_failure"
	GPULost         FaultKind = "gpu_lost"
	NVLinkErrors    FaultKind = "nvlink_errors"
	PCIeReplay      FaultKind = "pcie_replay"
	// FieldError makes one field of the GPU fail to read (NVML
	// ERROR_UNKNOWN) while the others keep answering.
	FieldError FaultKind = "field_error"
)

var faultKinds = []FaultKind{ThermalThrottle, PowerThrottle, XID, ECCDBE, RowRemapFailure, GPULost, NVLinkErrors, PCIeReplay, FieldError}

// windowed reports whether a fault kind is a state that lasts (a window)
// rather than a point event that counters record.
func (k FaultKind) windowed() bool {
	switch k {
	case ThermalThrottle, PowerThrottle, GPULost, FieldError:
		return true
	}
	return false
}

// Scenario is a parsed and validated scenario file.
type Scenario struct {
	Name        string
	Description string
	// Origin is the scenario's fixed start; zero means "when the source is
	// created" (the clock's time at New).
	Origin time.Time
	// Repeat, when set, replays the workloads every Repeat (the demo runs
	// forever); faults recur on their own `every`.
	Repeat time.Duration
	// Noise is what real boards add to idle readings; zero keeps the
	// clean signals.
	Noise     Noise
	Nodes     []Node
	Workloads []Workload
	Faults    []Fault
	file      string
}

// Noise makes idle GPUs read like real ones: NVML's utilization is the
// share of a sample period in which any kernel ran, so a context's own
// housekeeping (the driver, a monitoring probe) reads a few percent now and
// then; power jitters around an idle draw that differs from board to board.
type Noise struct {
	// IdleUtilPercent: an idle GPU reads a whole percentage between 0 and
	// this, drawn per sample (graphics-engine activity follows it).
	IdleUtilPercent float64
	// PowerJitterW: every power reading moves by up to ± this many watts
	// (at least the built-in 1.2 W).
	PowerJitterW float64
	// BoardIdleSpread: each board's idle draw is its model's idle power
	// times 1 ± up to this fraction, fixed per board.
	BoardIdleSpread float64
}

// Node is one host of the fleet.
type Node struct {
	Hostname string
	Model    *Model
	GPUs     int
	// MIG lists, per GPU index, the profiles of its GPU instances (GI ids
	// 1..n in order). A GPU in MIG mode is published per instance.
	MIG map[int][]string
}

// MIGRef names one MIG instance of a GPU.
type MIGRef struct {
	GPU      int
	Instance int // GPU instance id (GPU_I_ID), 1-based
}

// Params tune a behaviour; zero values take the behaviour's defaults (see doc.go).
type Params struct {
	Util       float64       // mean GPU utilization (%) while working
	MemoryGiB  float64       // GPU memory per GPU held by the process
	Active     time.Duration // length of the active phase (hung, stuck, idle notebook)
	Delay      time.Duration // startup_delay: time before the first GPU use
	StallEvery time.Duration // bursty_training: one stall per period
	Stall      time.Duration // bursty_training: stall length
	Period     time.Duration // inference_daily: cycle length
	Phase      time.Duration // inference_daily: how much later than the origin the trough comes
	MinUtil    float64       // inference_daily trough
	MaxUtil    float64       // inference_daily peak
	IdleGPUs   int           // partial_gpus: GPUs (the last ones listed) that stay idle
	OrphanFor  time.Duration // orphan: how long the process outlives the allocation (0 = forever)
	CPUCores   float64       // CPU cores the job burns while it runs
	Every      time.Duration // notebook: one burst per period
	Burst      time.Duration // notebook: burst length
	Quiet      time.Duration // inference_daily: span around each trough with no request at all
}

// Workload is one allocation: a job holding GPUs of one node over a time span.
type Workload struct {
	ID        string // hpc_job id (slurm) or pod name (kubernetes)
	Scheduler string
	Namespace string
	Container string
	User      string
	Account   string
	Team      string
	Kind      string
	JobName   string
	Command   string
	Node      string
	GPUs      []int
	MIG       *MIGRef
	// Start and End are offsets from the scenario origin.
	Start, End time.Duration
	Behaviour  Behaviour
	Params     Params
	Labels     map[string]string
	// Shared holds a time-sliced (or MPS) replica of its GPUs: other shared
	// workloads may hold them at the same time, the device's use is their
	// sum, and each process's own use is published (gpuwatch_holder_*).
	Shared bool
	Expect []string
	line   int
	key    uint64 // noise key: hash of node and id
}

// Fault is a hardware fault on some GPUs of one node, once or recurring.
type Fault struct {
	Kind     FaultKind
	Node     string
	GPUs     []int
	At       time.Duration // first occurrence, from the origin
	Duration time.Duration // window kinds: how long it lasts (0 = for good)
	Every    time.Duration // recurrence period (0 = once)
	Until    time.Duration // last possible occurrence (0 = no end)
	XID      int           // xid: the code
	Count    int           // errors per occurrence (counters)
	Field    string        // field_error: the field that fails (see FieldNames)
}

// LoadScenario reads and validates a scenario file.
func LoadScenario(path string) (*Scenario, error) {
	// configfile.ReadFile refuses a FIFO or device without blocking on it,
	// and a file over configfile.MaxBytes.
	data, err := configfile.ReadFile(path)
	if err != nil {
		return nil, configfile.Errors{{File: path, Msg: fmt.Sprintf("read scenario: %v", err)}}
	}
	return ParseScenario(path, data)
}

// ParseScenario parses a scenario through internal/configfile (one
// document, known keys only, no NaN or infinity, every value checked by its
// field's type as it is decoded), then checks the rules that join keys;
// name is used in error messages. Every problem is returned (configfile.Errors), each as
// "file:line: key.path: problem".
func ParseScenario(name string, data []byte) (*Scenario, error) {
	var f scenarioFile
	doc, err := configfile.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	if doc.Root == nil {
		return nil, configfile.Errors{{File: name, Msg: "empty scenario"}}
	}
	v := &validator{file: name, doc: doc}
	sc := v.scenario(&f)
	if err := v.errs.Err(); err != nil {
		return nil, err
	}
	sc.file = name
	return sc, nil
}

// deviceKeys names the devices a workload holds: "node/gpu" or "node/gpu/gi".
func (w *Workload) deviceKeys() []string {
	if w.MIG != nil {
		return []string{fmt.Sprintf("%s/%d/%d", w.Node, w.MIG.GPU, w.MIG.Instance)}
	}
	out := make([]string, len(w.GPUs))
	for i, g := range w.GPUs {
		out[i] = fmt.Sprintf("%s/%d", w.Node, g)
	}
	return out
}

//go:embed scenarios/*.yaml
var builtinFS embed.FS

// BuiltinNames lists the scenarios shipped in scenarios/, without ".yaml".
func BuiltinNames() []string {
	entries, _ := fs.ReadDir(builtinFS, "scenarios")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return out
}

// Builtin parses a shipped scenario by name ("default", "throttling-xid",
// "corpus"), so tests and the demo need no file path.
func Builtin(name string) (*Scenario, error) {
	p := "scenarios/" + name + ".yaml"
	data, err := builtinFS.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("built-in scenario %q: unknown (have %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	return ParseScenario(p, data)
}

// DefaultScenario is the built-in scenario used when no file is given.
func DefaultScenario() *Scenario {
	sc, err := Builtin("default")
	if err != nil {
		// The file is embedded and a test parses it: only a broken build gets here.
		panic(fmt.Sprintf("sim: built-in scenario: %v", err))
	}
	return sc
}
