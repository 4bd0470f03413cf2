// Package features reads what the detectors need from PromQL: for every GPU
// (and MIG instance) and every analysis step, the sample count, GPU util
// mean/max/min, framebuffer peak and size, power as a fraction of the limit,
// SM and DRAM activity where DCGM_FI_PROF_* exist, plus allocation info and
// orphaned processes.
//
// Every feature is one aggregate range query over the whole fleet, so the
// number of queries per call is fixed (Queries) whatever the fleet size and
// however many steps are read. The same expressions run on the Prometheus
// HTTP API and on the embedded TSDB.
package features

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// GPU is one device's features in one step, for one holder (Job) or for
// none (Job == "": the device was not allocated).
type GPU struct {
	Host   string
	Device string // UUID, or UUID/GI for a MIG instance
	UUID   string
	Model  string
	Job    string // hpc_job, or namespace/pod
	HPCJob string
	Pod    string
	NS     string
	// Samples is the number of framebuffer samples carrying this holder:
	// every GPU and MIG instance reports memory, in dcgm-exporter too.
	Samples float64
	// HasUtil is false on MIG instances (DCGM has no per-instance util).
	HasUtil              bool
	UtilAvg, UtilMax     float64
	HasFB                bool
	FBMaxMiB, FBTotalMiB float64
	fbFreeMin            float64
	hasFree              bool
	merged               [nFeatures]int // series merged per feature
	// HasPowerW: mean power draw (W) over the step; HasLimit: the power
	// limit, which dcgm-exporter's default counters leave out.
	HasPowerW   bool
	PowerW      float64
	HasLimit    bool
	PowerLimitW float64
	HasSM       bool
	SMAvg       float64
	HasDRAM     bool
	DRAMAvg     float64
	// HasGR: graphics-engine activity, the one activity ratio DCGM has per
	// MIG instance and in dcgm-exporter's default counters.
	HasGR      bool
	GRAvg      float64
	HasTensor  bool
	TensorAvg  float64
	HasMemCopy bool
	MemCopyAvg float64 // % of time device memory was read or written
	// Health is the step's throttling and faults (health.go).
	Health Health
	// Cluster is the series' cluster label, "" where it has none.
	Cluster string
	// Holders is the number of holders the device had in the step: above
	// one it is shared (time-slicing, MPS), and every device counter above
	// is the sum of all their use, no one holder's.
	Holders int
	// Own is the holder's own use of a shared device, from the
	// gpuwatch_holder_* series (NVML's per-process use summed per holder);
	// HasOwn is false where no exporter read it (dcgm-exporter's per-vgpu
	// copies, MIG instances, old drivers).
	Own    OwnUse
	HasOwn bool
	// replica: a series of the row is one of dcgm-exporter's per-replica
	// copies of a shared device's series (a vgpu label).
	replica bool
}

// Info is gpuwatch_allocation_info for one holder of one device.
type Info struct {
	User, Team, Kind, Account, JobName, Scheduler string
}

// Orphan is a process holding GPU memory with no live allocation.
type Orphan struct {
	Host, Device, UUID, Model string
	PID, Command, User, Job   string
	// Samples is the number of scrapes in the step that saw it orphaned.
	Samples float64
}

// Step is the features of every device over (End-Step, End].
type Step struct {
	Start, End time.Time
	// Expected is the sample count of a full step per device (host|device):
	// each device's own cadence, learnt from its samples (see Cadence), so
	// that targets scraped at different intervals are each judged by their
	// own; a device far below it is missing data (unknown), not idle. One
	// map is shared by the steps of a fetch.
	Expected map[string]float64
	// MaxExpected is the largest of Expected.
	MaxExpected float64
	// DeviceSamples counts samples per host|device over all holders: a job
	// that ends mid-step shares its device's samples with the next holder.
	DeviceSamples map[string]float64
	GPUs          []GPU
	// Info is keyed by host|device|job.
	Info    map[string]Info
	Orphans []Orphan
}

// DeviceID is the key of Step.DeviceSamples.
func DeviceID(host, device string) string { return host + "|" + device }

// Queries is the number of queries Fetch issues, whatever the fleet size and
// the number of steps.
const Queries = 18

// parallel bounds the queries in flight at once.
const parallel = 4

type feature int

const (
	fCount feature = iota
	fUtilAvg
	fUtilMax
	fFBMax
	fFBFreeMin
	fPowerW
	fLimit
	fSMAvg
	fDRAMAvg
	fGRAvg
	fTensorAvg
	fMemCopyAvg
	fInfo
	fOrphan
	fThrottle
	fFaults
	fOwnSM
	fOwnMem
	nFeatures
)

// Exprs returns the PromQL expressions for a step, in feature order. The
// range is one millisecond short of the step: Prometheus 2.x includes a
// sample sitting exactly on the window's left edge and 3.x does not, and
// the same answer from both is part of the contract.
func Exprs(step time.Duration) []string {
	w := fmt.Sprintf("[%dms]", step.Milliseconds()-1)
	o := func(fn string, m *schema.Metric) string { return fn + "_over_time(" + m.Name + w + ")" }
	throttle, faults := healthExprs(w)
	return []string{
		fCount:   o("count", schema.FBUsed),
		fUtilAvg: o("avg", schema.GPUUtil),
		fUtilMax: o("max", schema.GPUUtil),
		fFBMax:   o("max", schema.FBUsed),
		// At the peak of used memory free memory is at its least: their
		// sum is the device's memory, read without a second pass over used.
		fFBFreeMin:  o("min", schema.FBFree),
		fPowerW:     o("avg", schema.PowerUsage),
		fLimit:      o("max", schema.PowerLimit),
		fSMAvg:      o("avg", schema.ProfSMActive),
		fDRAMAvg:    o("avg", schema.ProfDRAMActive),
		fGRAvg:      o("avg", schema.ProfGrEngineActive),
		fTensorAvg:  o("avg", schema.ProfTensorActive),
		fMemCopyAvg: o("avg", schema.MemCopyUtil),
		fInfo:       o("max", schema.AllocationInfo),
		fOrphan:     o("count", schema.ProcessOrphaned),
		fThrottle:   throttle,
		fFaults:     faults,
		fOwnSM:      o("avg", schema.HolderSMUtil),
		fOwnMem:     o("max", schema.HolderMemory),
	}
}

// Fetch reads n steps ending at end (the last step is (end-step, end]),
// learning from them alone.
func Fetch(ctx context.Context, q query.Querier, end time.Time, n int, step time.Duration) ([]Step, error) {
	return FetchWith(ctx, q, end, n, step, nil)
}

// FetchWith is Fetch that learns into mem (exporters' pods, each device's
// cadence) and judges by what mem already knew; mem may be nil.
func FetchWith(ctx context.Context, q query.Querier, end time.Time, n int, step time.Duration, mem *Memory) ([]Step, error) {
	if mem == nil {
		mem = NewMemory()
	}
	mem.ensure()
	if n < 1 {
		return nil, fmt.Errorf("fetch features: %d steps", n)
	}
	if step < time.Second {
		return nil, fmt.Errorf("fetch features: step %s too short", step)
	}
	end = end.Truncate(time.Millisecond)
	start := end.Add(-time.Duration(n-1) * step)
	steps := make([]Step, n)
	for i := range steps {
		e := start.Add(time.Duration(i) * step)
		steps[i] = Step{Start: e.Add(-step), End: e, DeviceSamples: map[string]float64{}, Info: map[string]Info{}}
	}
	results, err := queryAll(ctx, q, Exprs(step), query.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, fmt.Errorf("fetch features: %w", err)
	}
	ends := make([]time.Time, n)
	for i := range steps {
		ends[i] = steps[i].End
	}
	mem.Exporters.classify(results, results[fCount], ends)
	// rows[step] accumulates the features of each holder.
	rows := make([]stepRows, n)
	for i := range rows {
		rows[i] = stepRows{gpus: map[string]*GPU{}, own: map[string]map[string]*OwnUse{}}
	}
	for f, m := range results {
		for _, ss := range m {
			id, ok := identify(ss.Metric, mem.Exporters)
			if !ok {
				continue // not a GPU series (no UUID): nothing to attribute
			}
			for _, p := range ss.Values {
				i := int(p.Timestamp.Time().Sub(start) / step)
				if i < 0 || i >= n || !p.Timestamp.Time().Equal(steps[i].End) {
					continue
				}
				val := float64(p.Value)
				if math.IsNaN(val) || math.IsInf(val, 0) {
					continue // e.g. power over a zero limit: no reading, not a reading of zero
				}
				addSample(&steps[i], rows[i], feature(f), ss.Metric, id, val)
			}
		}
	}
	for i := range steps {
		finishStep(&steps[i], rows[i])
	}
	// Each device is judged by its own cadence, shared by the fetch's
	// steps: a step in which a device's data starts (or thins out) is
	// partial, not full.
	expected := mem.learn(steps)
	var most float64
	for _, e := range expected {
		most = max(most, e)
	}
	for i := range steps {
		steps[i].Expected, steps[i].MaxExpected = expected, most
	}
	return steps, nil
}

// queryAll runs the range queries exprs over r and returns their matrices,
// in order. The queries run side by side: each is one pass over one
// metric, and a Prometheus (or the embedded engine) answers them on
// several cores.
func queryAll(ctx context.Context, q query.Querier, exprs []string, r query.Range) ([]model.Matrix, error) {
	calls := make([]query.Call, len(exprs))
	for i, expr := range exprs {
		calls[i] = query.Ranged(expr, r)
	}
	// One missing feature spoils the step: the first error cancels the
	// rest, and is the one returned.
	results := make([]model.Matrix, len(exprs))
	err := query.Fan(ctx, q, calls, parallel, func(i int, v model.Value) error {
		m, ok := v.(model.Matrix)
		if !ok {
			return fmt.Errorf("%q returned %s, want a matrix", exprs[i], v.Type())
		}
		results[i] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// stepRows is what one step's samples build: each series holder's row
// (gpus, by DeviceID|job) and each holder's own use of a shared device
// (own, by DeviceID, then job).
type stepRows struct {
	gpus map[string]*GPU
	own  map[string]map[string]*OwnUse
}

// addSample adds one sample of feature f, from the series with labels m
// held by id, to its step s: an info or orphan series is the step's own,
// a holder's own use goes to rows.own, every other feature into the
// holder's row in rows.gpus.
func addSample(s *Step, rows stepRows, f feature, m model.Metric, id GPU, val float64) {
	switch f {
	case fOwnSM, fOwnMem:
		addOwn(rows.own, f, id, val)
		return
	case fInfo:
		if val > 0 {
			s.Info[DeviceID(id.Host, id.Device)+"|"+infoJob(m, id)] = info(m)
		}
		return
	case fOrphan:
		if val > 0 {
			s.Orphans = append(s.Orphans, Orphan{Host: id.Host, Device: id.Device, UUID: id.UUID,
				Model: id.Model, PID: lv(m, schema.LabelPID), Command: lv(m, schema.LabelCommand),
				User: lv(m, schema.LabelUser), Job: lv(m, schema.LabelJob), Samples: val})
		}
		return
	}
	key := DeviceID(id.Host, id.Device) + "|" + id.Job
	g := rows.gpus[key]
	if g == nil {
		c := id
		g = &c
		rows.gpus[key] = g
	}
	if f == fThrottle || f == fFaults {
		setHealth(g, f, m, val)
		return
	}
	set(g, f, val)
}

// finishStep turns the step's rows into its GPUs, a shared device's
// holders told apart (splitShared), each device's samples counted, in a
// stable order.
func finishStep(s *Step, sr stepRows) {
	rows := splitShared(sr.gpus, sr.own)
	for _, g := range rows {
		if g.Samples <= 0 {
			continue // a holder with no memory sample this step is not there
		}
		if g.HasFB && g.hasFree {
			g.FBTotalMiB = g.FBMaxMiB + g.fbFreeMin
		}
		finishHealth(&g.Health)
		s.GPUs = append(s.GPUs, *g)
		d := DeviceID(g.Host, g.Device)
		s.DeviceSamples[d] += g.Samples
	}
	countHolders(s.GPUs)
	sort.Slice(s.GPUs, func(a, b int) bool {
		x, y := &s.GPUs[a], &s.GPUs[b]
		if x.Host != y.Host {
			return x.Host < y.Host
		}
		if x.Device != y.Device {
			return x.Device < y.Device
		}
		return x.Job < y.Job
	})
	sort.Slice(s.Orphans, func(a, b int) bool {
		x, y := &s.Orphans[a], &s.Orphans[b]
		return x.Host+x.Device+x.PID < y.Host+y.Device+y.PID
	})
}

// set merges one series' value into a holder's row. Several series can
// describe one holder in one step: an exporter restarted mid-step (with
// honor_labels: false its pod name is on every series), or its instance
// changed. Counts add up, extremes keep the extreme and means average over
// the series, so a restart is neither missing data nor a new holder.
func set(g *GPU, f feature, v float64) {
	n := g.merged[f]
	g.merged[f]++
	mean := func(old float64) float64 { return (old*float64(n) + v) / float64(n+1) }
	switch f {
	case fCount:
		g.Samples += v
	case fUtilAvg:
		g.UtilAvg, g.HasUtil = mean(g.UtilAvg), true
	case fUtilMax:
		g.UtilMax = max(g.UtilMax, v)
	case fFBMax:
		g.FBMaxMiB, g.HasFB = max(g.FBMaxMiB, v), true
	case fFBFreeMin:
		if n == 0 || v < g.fbFreeMin {
			g.fbFreeMin = v
		}
		g.hasFree = true
	case fPowerW:
		g.PowerW, g.HasPowerW = mean(g.PowerW), true
	case fLimit:
		g.PowerLimitW, g.HasLimit = max(g.PowerLimitW, v), true
	case fGRAvg:
		g.GRAvg, g.HasGR = mean(g.GRAvg), true
	case fTensorAvg:
		g.TensorAvg, g.HasTensor = mean(g.TensorAvg), true
	case fMemCopyAvg:
		g.MemCopyAvg, g.HasMemCopy = mean(g.MemCopyAvg), true
	case fSMAvg:
		g.SMAvg, g.HasSM = mean(g.SMAvg), true
	case fDRAMAvg:
		g.DRAMAvg, g.HasDRAM = mean(g.DRAMAvg), true
	}
}

func lv(m model.Metric, name string) string { return string(m[model.LabelName(name)]) }

// Host returns the node name of a series: dcgm-exporter's hostname label, the
// older Hostname, or Prometheus' instance when neither is set.
func Host(m model.Metric) string {
	if h := lv(m, schema.LabelHostname); h != "" {
		return h
	}
	if h := lv(m, schema.LabelOldHost); h != "" {
		return h
	}
	return lv(m, "instance")
}

// ExportedPrefix is what Prometheus puts before a target's own label when
// the scrape sets it too and honor_labels is false.
const ExportedPrefix = "exported_"

// Holder returns the pod and namespace a series names as its GPU's holder:
// exported_pod and exported_namespace when Prometheus renamed the
// exporter's labels (honor_labels: false), else pod and namespace. Whether
// that pod is the scrape target's own is for Exporters to say.
func Holder(m model.Metric) (pod, namespace string) {
	if p := lv(m, ExportedPrefix+schema.LabelPod); p != "" {
		return p, lv(m, ExportedPrefix+schema.LabelNamespace)
	}
	return lv(m, schema.LabelPod), lv(m, schema.LabelNamespace)
}

// identifyRaw extracts host, device and holder from a GPU series, taking
// any pod it names for the holder.
func identifyRaw(m model.Metric) (GPU, bool) {
	uuid := lv(m, schema.LabelUUID)
	if uuid == "" {
		return GPU{}, false
	}
	dev := uuid
	if gi := lv(m, schema.LabelGIID); gi != "" {
		dev = uuid + "/" + gi
	}
	g := GPU{Host: Host(m), Device: dev, UUID: uuid, Model: lv(m, schema.LabelModelName),
		HPCJob: lv(m, schema.LabelHPCJob), Cluster: Cluster(m), replica: lv(m, schema.LabelVGPU) != ""}
	g.Pod, g.NS = Holder(m)
	g.setJob()
	return g, true
}

func (g *GPU) setJob() {
	switch {
	case g.HPCJob != "":
		g.Job = g.HPCJob
	case g.Pod != "":
		g.Job = g.NS + "/" + g.Pod
	default:
		g.Job = ""
	}
}

// identify is identifyRaw with the exporters' own pods (x, or named so
// when x is nil) holding nothing: their GPUs are free.
func identify(m model.Metric, x Exporters) (GPU, bool) {
	g, ok := identifyRaw(m)
	if !ok {
		return g, false
	}
	if ns, pod, plain := plainPod(m); plain {
		if x.has(ns, pod) || (x == nil && NamedExporter(pod, lv(m, schema.LabelContainer))) {
			g.Pod, g.NS = "", ""
			g.setJob()
		}
	}
	return g, true
}

// infoJob is the holder an allocation_info series describes: its job_id,
// else the allocation labels it carries like any GPU series.
func infoJob(m model.Metric, id GPU) string {
	if j := lv(m, schema.LabelJob); j != "" {
		return j
	}
	return id.Job
}

func info(m model.Metric) Info {
	return Info{User: lv(m, schema.LabelUser), Team: lv(m, schema.LabelTeam), Kind: strings.ToLower(lv(m, schema.LabelKind)),
		Account: lv(m, schema.LabelAccount), JobName: lv(m, schema.LabelJobName), Scheduler: lv(m, schema.LabelScheduler)}
}
