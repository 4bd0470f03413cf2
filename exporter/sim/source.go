package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Options configure the simulator.
type Options struct {
	Seed  int64
	Clock source.Clock
	// Node selects the node of the scenario's fleet that Collect reports
	// ("" = the first node). CollectAll reports every node.
	Node string
	// Origin overrides the scenario's origin; when both are zero the
	// origin is the clock's time at New.
	Origin time.Time
}

// Source simulates a fleet. It is safe for concurrent use.
type Source struct {
	sc     *Scenario
	seed   uint64
	clock  source.Clock
	origin time.Time
	node   int
	nodes  []*simNode

	mu sync.Mutex // guards the integrated state of the devices
}

type simNode struct {
	host      string
	devs      []*simDevice
	workloads []*Workload
}

// slot is one workload's claim on one device.
type slot struct {
	w   *Workload
	pos int // index of the GPU in w.GPUs
}

type simDevice struct {
	id       uint64
	index    int
	uuid     string
	bus      string
	model    *Model
	mig      *source.MIG
	key      string
	memMiB   float64
	slices   int          // MIG: compute slices of the instance
	children []*simDevice // MIG instances of a GPU in MIG mode
	parent   *simDevice   // the GPU of a MIG instance
	pos      int          // index in simNode.devs
	isParent bool
	slots    []slot
	faults   []*Fault
	xids     []int      // distinct XID codes this device's faults raise
	xidLabel [][]string // label values, parallel to xids
	tempOff  float64    // per-board offset: no two GPUs run at the same temperature
	idleW    float64    // this board's idle draw (the model's, spread by Noise)
	ctxW     float64    // its draw holding a context and running nothing (ContextPowerW, spread alike)

	// Integrated between collections.
	init     bool
	lastNs   int64
	energyMJ float64
	nvlinkBW float64
}

// ErrUnknownNode is returned by New when Options.Node names no node of the
// scenario: a configuration error (the CLI exits 2 on it).
var ErrUnknownNode = errors.New("unknown node")

// New builds a simulated source.
func New(sc *Scenario, opts Options) (*Source, error) {
	if sc == nil || len(sc.Nodes) == 0 {
		return nil, errors.New("sim: scenario has no nodes")
	}
	clock := opts.Clock
	if clock == nil {
		clock = source.SystemClock{}
	}
	s := &Source{sc: sc, seed: uint64(opts.Seed), clock: clock}
	switch {
	case !opts.Origin.IsZero():
		s.origin = opts.Origin
	case !sc.Origin.IsZero():
		s.origin = sc.Origin
	default:
		s.origin = clock.Now()
	}
	s.node = -1
	for i := range sc.Nodes {
		n := &sc.Nodes[i]
		s.nodes = append(s.nodes, s.buildNode(i, n))
		if n.Hostname == opts.Node || (opts.Node == "" && i == 0) {
			s.node = i
		}
	}
	if s.node < 0 {
		return nil, fmt.Errorf("sim: %w %q: scenario %s has nodes %s", ErrUnknownNode, opts.Node, sc.Name, strings.Join(s.Nodes(), ", "))
	}
	return s, nil
}

func (s *Source) buildNode(ni int, n *Node) *simNode {
	sn := &simNode{host: n.Hostname}
	byIndex := map[int]*simDevice{}
	migs := map[[2]int]*simDevice{}
	for g := 0; g < n.GPUs; g++ {
		id := hashString(n.Hostname)<<8 ^ uint64(g)
		d := &simDevice{
			id: id, index: g, uuid: uuidFor(s.seed, n.Hostname, g), bus: n.Model.busID(g),
			model: n.Model, memMiB: n.Model.MemoryMiB,
			tempOff: 3 * sym(s.seed, id, 0x7e3f),
			idleW:   n.Model.IdlePowerW * (1 + s.sc.Noise.BoardIdleSpread*sym(s.seed, id, 0x1d1e)),
			ctxW:    n.Model.ContextPowerW * (1 + s.sc.Noise.BoardIdleSpread*sym(s.seed, id, 0x1d1e)),
		}
		d.key = source.DeviceKey(d.uuid, nil)
		sn.devs = append(sn.devs, d)
		byIndex[g] = d
		if profs, ok := n.MIG[g]; ok {
			d.isParent = true
			for k, p := range profs {
				gib, _ := migProfileGiB(p)
				var slices int
				_, _ = fmt.Sscanf(p, "%dg", &slices)
				c := &simDevice{
					id: id ^ uint64(k+1)<<40, index: g, uuid: d.uuid, bus: d.bus, model: n.Model,
					mig:    &source.MIG{Profile: p, GIID: k + 1, CIID: 0},
					memMiB: gib * 1024, slices: slices, tempOff: d.tempOff,
				}
				c.key = source.DeviceKey(c.uuid, c.mig)
				c.parent = d
				d.children = append(d.children, c)
				sn.devs = append(sn.devs, c)
				migs[[2]int{g, k + 1}] = c
			}
		}
	}
	for wi := range s.sc.Workloads {
		w := &s.sc.Workloads[wi]
		if w.Node != n.Hostname {
			continue
		}
		sn.workloads = append(sn.workloads, w)
		if w.MIG != nil {
			if d := migs[[2]int{w.MIG.GPU, w.MIG.Instance}]; d != nil {
				d.slots = append(d.slots, slot{w: w})
			}
			continue
		}
		for pos, g := range w.GPUs {
			byIndex[g].slots = append(byIndex[g].slots, slot{w: w, pos: pos})
		}
	}
	for fi := range s.sc.Faults {
		f := &s.sc.Faults[fi]
		if f.Node != n.Hostname {
			continue
		}
		for _, g := range f.GPUs {
			d := byIndex[g]
			d.faults = append(d.faults, f)
			if f.Kind == XID && !contains(d.xids, f.XID) {
				d.xids = append(d.xids, f.XID)
			}
		}
	}
	for i, d := range sn.devs {
		d.pos = i
		sort.Ints(d.xids)
		for _, c := range d.xids {
			d.xidLabel = append(d.xidLabel, []string{strconv.Itoa(c)})
		}
	}
	return sn
}

// uuidFor makes a stable, well-formed GPU UUID for (seed, host, index).
func uuidFor(seed uint64, host string, idx int) string {
	a := mix64(seed ^ hashString(host) ^ uint64(idx)*0x9E3779B97F4A7C15)
	b := mix64(a ^ 0x5bd1e995)
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x",
		uint32(a>>32), uint16(a>>16), uint16(a), uint16(b>>48), b&0xFFFFFFFFFFFF)
}

// Name is "sim".
func (s *Source) Name() string { return "sim" }

// Close releases nothing: the simulator holds no resources.
func (s *Source) Close() error { return nil }

// Origin is the instant the scenario's offsets count from.
func (s *Source) Origin() time.Time { return s.origin }

// Scenario returns the scenario being simulated.
func (s *Source) Scenario() *Scenario { return s.sc }

// Nodes lists the hostnames of the fleet, in scenario order.
func (s *Source) Nodes() []string {
	out := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n.host
	}
	return out
}

// Collect returns the snapshot of the selected node at the clock's time.
func (s *Source) Collect(ctx context.Context) (*source.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim collect: %w", err)
	}
	t := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshot(s.nodes[s.node], t), nil
}

// CollectAll returns one snapshot per node, all at the same clock time.
func (s *Source) CollectAll(ctx context.Context) ([]*source.Snapshot, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sim collect: %w", err)
	}
	t := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*source.Snapshot, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = s.snapshot(n, t)
	}
	return out, nil
}

// instance finds the occurrence of w that covers e: its cycle k (0 without
// repeat) and the offset into it. ok is false before the first start.
func (s *Source) instance(w *Workload, e time.Duration) (k int64, off time.Duration, ok bool) {
	off = e - w.Start
	if off < 0 {
		return 0, 0, false
	}
	if r := s.sc.Repeat; r > 0 {
		k = int64(off / r)
		off -= time.Duration(k) * r
	}
	return k, off, true
}

// jobID is the job id of cycle k of a workload: cycles after the first get
// a suffix so a replayed job is a new job, as it would be on a cluster.
func (w *Workload) jobID(k int64) (hpc, pod string) {
	id := w.ID
	if k > 0 {
		id += "-r" + strconv.FormatInt(k, 10)
	}
	if w.Scheduler == schema.SchedulerKubernetes {
		return "", id
	}
	return id, ""
}

func (w *Workload) fullJobID(k int64) string {
	hpc, pod := w.jobID(k)
	if hpc != "" {
		return hpc
	}
	return w.Namespace + "/" + pod
}

// orphanPhase reports whether w's process outlives its allocation at off.
func (s *Source) orphanPhase(w *Workload, off time.Duration) bool {
	if w.Behaviour != Orphan {
		return false
	}
	dur := w.End - w.Start
	if off < dur {
		return false
	}
	if w.Params.OrphanFor > 0 {
		return off < dur+w.Params.OrphanFor
	}
	return true
}

// reasons are the clock-event reasons we publish, shared with the NVML
// source through the catalogue.
var reasons = schema.ClockEventReasons

// reasonLabels are shared, read-only label-value slices, one per reason.
var reasonLabels = func() [][]string {
	out := make([][]string, len(reasons))
	for i, r := range reasons {
		out[i] = []string{r.Name}
	}
	return out
}()

// ReasonNames lists the clock-event reason label values, in bit order.
func ReasonNames() []string {
	out := make([]string, len(reasons))
	for i, r := range reasons {
		out[i] = r.Name
	}
	return out
}

func (s *Source) snapshot(n *simNode, t time.Time) *source.Snapshot {
	e := t.Sub(s.origin)
	step := uint64(t.Unix())
	snap := &source.Snapshot{Time: t, Hostname: n.host, Devices: make([]source.Device, len(n.devs))}
	loads := make([]load, len(n.devs))
	shared := make([]bool, len(n.devs))
	for i, d := range n.devs {
		loads[i], shared[i] = s.deviceLoad(d, e, step, snap)
	}
	for i, d := range n.devs {
		s.device(d, i, loads, shared[i], e, t, step, snap)
	}
	// Processes on lost devices are not seen.
	if len(snap.Processes) > 0 {
		up := map[string]bool{}
		for i := range snap.Devices {
			up[snap.Devices[i].Key()] = snap.Devices[i].Up
		}
		kept := snap.Processes[:0]
		for _, p := range snap.Processes {
			if up[p.DeviceKey] {
				kept = append(kept, p)
			}
		}
		snap.Processes = kept
	}
	s.jobCPU(n, e, snap)
	return snap
}

// deviceLoad sums what the workloads on d do at e (an orphaned process
// beside a new job, the tenants of a shared GPU), adding their
// allocations and processes to snap; shared says a shared workload ran.
func (s *Source) deviceLoad(d *simDevice, e time.Duration, step uint64, snap *source.Snapshot) (l load, shared bool) {
	nz := noiser{seed: s.seed, dev: d.id, step: step}
	for _, sl := range d.slots {
		k, off, ok := s.instance(sl.w, e)
		if !ok {
			continue
		}
		hpc, pod := sl.w.jobID(k)
		dur := sl.w.End - sl.w.Start
		switch {
		case off < dur:
			wl := sl.w.load(sl.pos, off, e, s.seed, nz)
			if sl.w.Shared {
				shared = true
				l = mergeShared(l, wl)
			} else {
				l = merge(l, wl)
			}
			snap.Allocations = append(snap.Allocations, source.Allocation{
				DeviceKey: d.key, Scheduler: sl.w.Scheduler,
				Pod: pod, Namespace: sl.w.Namespace, Container: containerOf(sl.w),
				HPCJob: hpc, User: sl.w.User, Account: sl.w.Account, Team: sl.w.Team,
				Kind: sl.w.Kind, JobName: sl.w.JobName, Labels: maps.Clone(sl.w.Labels),
				Start: s.origin.Add(e - off),
			})
			if wl.process {
				snap.Processes = append(snap.Processes, s.process(d, sl, k, wl, false))
			}
		case s.orphanPhase(sl.w, off):
			wl := sl.w.orphanLoad(nz)
			l = merge(l, wl)
			snap.Processes = append(snap.Processes, s.process(d, sl, k, wl, true))
		}
	}
	// Never hold more than the device has.
	if limit := (d.memMiB - d.model.ReservedMiB*float64(btoi(d.mig == nil))) / 1024 * 0.98; l.memGiB > limit {
		l.memGiB = limit
	}
	return l, shared
}

// device writes device i of the node (d) into snap at t: a MIG instance
// from its own load, a MIG parent from its instances', a lost board as
// down, and the samples with the failing fields left out.
func (s *Source) device(d *simDevice, i int, loads []load, shared bool, e time.Duration, t time.Time, step uint64, snap *source.Snapshot) {
	dev := &snap.Devices[i]
	*dev = source.Device{Index: d.index, UUID: d.uuid, PCIBusID: d.bus, Model: d.model.Name, MIG: d.mig,
		Up: true, Capabilities: simCapabilities}
	if d.mig != nil {
		// MIG instances share the parent's faults; lost means lost.
		if d.parent.faultState(e).lost {
			dev.Up = false
			return
		}
		dev.Samples = migSamples(d, &loads[i])
		return
	}
	l := loads[i]
	if d.isParent {
		l = load{}
		for _, c := range d.children {
			cl := loads[c.pos]
			w := float64(c.slices) / 7
			l.power += cl.power * w
			l.memGiB += cl.memGiB
			l.util = max(l.util, cl.util) // not published; decides gpu_idle
			l.spin = l.spin || cl.spin
		}
	}
	fs := d.faultState(e)
	if fs.lost {
		dev.Up = false
		// Nothing is drawn while the board is off the bus: skip the gap.
		if ns := t.UnixNano(); d.init && ns > d.lastNs {
			d.lastNs = ns
		}
		return
	}
	if shared {
		// The simulator knows each process's own use, as NVML's
		// per-process utilization tells it on a time-sliced GPU.
		dev.ProcessUse, dev.Capabilities = true, simSharedCapabilities
	}
	dev.Samples = s.gpuSamples(d, &l, &fs, t, step)
	for _, f := range fs.failing {
		dev.Samples = dropMetrics(dev.Samples, fieldMetrics[f])
		snap.Errors = append(snap.Errors, source.FieldError{DeviceKey: d.key, Field: f, Err: errSimulatedUnknown})
	}
}

// merge combines two holders of one device (an orphaned process next to a
// new job's): memory adds up, the busier load sets the activity.
func merge(a, b load) load {
	if !a.process && a.util == 0 && a.power == 0 {
		return b
	}
	mem := a.memGiB + b.memGiB
	if b.util > a.util || b.spin {
		a = b
	}
	a.memGiB = mem
	a.process = true
	return a
}

// mergeShared combines the holders of a time-sliced GPU: the device runs
// their work in turn, so activity and power add up, to the device's whole.
func mergeShared(a, b load) load {
	a.util = min(a.util+b.util, 100)
	a.memCopy = min(a.memCopy+b.memCopy, 100)
	for _, p := range []struct {
		x *float64
		y float64
	}{{&a.gr, b.gr}, {&a.sm, b.sm}, {&a.occ, b.occ}, {&a.tensor, b.tensor},
		{&a.dram, b.dram}, {&a.fp64, b.fp64}, {&a.fp32, b.fp32}, {&a.fp16, b.fp16}, {&a.power, b.power},
		{&a.pcie, b.pcie}, {&a.nvlink, b.nvlink}} {
		*p.x = min(*p.x+p.y, 1)
	}
	a.memGiB += b.memGiB
	a.process = a.process || b.process
	a.spin = a.spin || b.spin
	return a
}

// dropMetrics removes the samples of a failing field, in place.
func dropMetrics(samples []source.Sample, ms []*schema.Metric) []source.Sample {
	kept := samples[:0]
	for _, smp := range samples {
		if !contains(ms, smp.Metric) {
			kept = append(kept, smp)
		}
	}
	return kept
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func containerOf(w *Workload) string {
	if w.Scheduler == schema.SchedulerKubernetes {
		return w.Container
	}
	return ""
}

var (
	simCapabilities       = []string{"sim"}
	simSharedCapabilities = []string{"sim", schema.CapabilityProcessUtilization}
)

func (s *Source) process(d *simDevice, sl slot, k int64, l load, orphan bool) source.Process {
	w := sl.w
	pid := 1000 + int(mix64(s.seed^w.key^uint64(k)<<20^uint64(sl.pos))%4_000_000)
	return source.Process{
		DeviceKey: d.key, PID: pid, Type: source.Compute,
		MemoryBytes: uint64(l.memGiB * (1 << 30)),
		Command:     w.command(), User: w.User, UID: 1000 + int(hashString(w.User)%60000),
		Job: w.fullJobID(k), Orphan: orphan,
		// Published only on a shared device (Device.ProcessUse).
		Use: &source.ProcessUse{SM: l.util, Memory: l.memCopy},
	}
}

func (s *Source) jobCPU(n *simNode, e time.Duration, snap *source.Snapshot) {
	for _, w := range n.workloads {
		k, off, ok := s.instance(w, e)
		if !ok || off >= w.End-w.Start {
			continue
		}
		// Cgroups are per job: a replayed job (a new job id) starts from zero.
		snap.JobCPU = append(snap.JobCPU, source.JobCPU{Job: w.fullJobID(k), Seconds: w.cpuSeconds(off)})
	}
}

// gpuSamples builds every NVML and profiling sample of a physical GPU.
func (s *Source) gpuSamples(d *simDevice, l *load, fs *faultState, t time.Time, step uint64) []source.Sample {
	m := d.model
	nz := noiser{seed: s.seed, dev: d.id, step: step}
	out := make([]source.Sample, 0, 64+len(d.xids))
	add := func(met *schema.Metric, v float64) {
		out = append(out, source.Sample{Metric: met, Value: v})
	}

	power := s.draw(d, l, fs, nz)
	heat := (power - m.IdlePowerW) / (m.MaxPowerW - m.IdlePowerW)
	temp := m.TempIdle + (m.TempMax-m.TempIdle)*heat + d.tempOff + 0.6*nz.sym(chTemp)
	memTemp := m.MemTempIdle + (m.MemTempMax-m.MemTempIdle)*heat + d.tempOff + 0.6*nz.sym(chMemTemp)
	if fs.thermal {
		temp = m.TempThrottle + 1.5 + nz.sym(chTemp)
		memTemp = m.MemTempMax + 12 + nz.sym(chMemTemp)
	}
	idle := l.util == 0 && !l.spin
	if idle && s.sc.Noise.IdleUtilPercent > 0 {
		// Housekeeping kernels: a whole percentage now and then, with the
		// engines barely stirring; the board stays in its idle state.
		u := math.Floor((s.sc.Noise.IdleUtilPercent + 1) * nz.unit(chUtil+70))
		l.util, l.gr, l.sm, l.dram = u, u/100, 0.3*u/100, 0.2*u/100
	}
	sm := m.SMClockMax
	if idle {
		sm = m.SMClockIdle
	}
	var bits uint64
	if idle {
		bits |= 0x1
	}
	if fs.power {
		bits |= 0x4
		sm = m.SMClockMax * (0.78 + 0.04*nz.unit(chClock))
	}
	if fs.thermal {
		bits |= 0x8 | 0x20 | 0x40
		sm = m.SMClockMax * (0.52 + 0.04*nz.unit(chClock))
	}
	sm = float64(int(sm/15) * 15) // NVML reports clocks in 15 MHz steps on these boards

	s.integrate(d, l, power, t.UnixNano())

	usedMiB := l.memGiB * 1024
	if !d.isParent { // NVML has no utilization for a GPU in MIG mode
		add(schema.GPUUtil, float64(int(l.util+0.5)))
		add(schema.MemCopyUtil, float64(int(l.memCopy+0.5)))
		add(schema.EncUtil, 0)
		add(schema.DecUtil, 0)
	}
	add(schema.FBUsed, float64(int(usedMiB)))
	add(schema.FBFree, float64(int(m.MemoryMiB-m.ReservedMiB-usedMiB)))
	add(schema.FBReserved, m.ReservedMiB)
	add(schema.GPUTemp, float64(int(temp+0.5)))
	if m.MemTempIdle > 0 {
		add(schema.MemoryTemp, float64(int(memTemp+0.5)))
	}
	add(schema.PowerUsage, float64(int(power*1000))/1000)
	add(schema.PowerLimit, m.PowerLimitW)
	add(schema.TotalEnergy, float64(int64(d.energyMJ)))
	add(schema.SMClock, sm)
	add(schema.MemClock, m.MemClock)
	add(schema.ClockEvents, float64(bits))
	add(schema.PowerViolation, fs.powerNs)
	add(schema.ThermViolation, fs.thermalNs)
	out = errorSamples(out, d, fs)
	if !d.isParent {
		out = profSamples(out, d, l)
	}
	for i, r := range reasons {
		out = append(out, source.Sample{Metric: schema.ClockEventActive, LabelValues: reasonLabels[i],
			Value: float64(btoi(bits&r.Bit != 0))})
	}
	for i := range d.xids {
		out = append(out, source.Sample{Metric: schema.XIDErrors, LabelValues: d.xidLabel[i],
			Value: float64(fs.xidCounts[i])})
	}
	return out
}

// draw is the board's power draw (W) under l: its quiet draw (a context
// holder's where the model has one) plus the load's share of the rest,
// with jitter; pinned at the limit while power-capped.
func (s *Source) draw(d *simDevice, l *load, fs *faultState, nz noiser) float64 {
	m := d.model
	jitter := max(1.2, s.sc.Noise.PowerJitterW)
	// A process holding a context keeps the board out of its deepest
	// power state: its quiet draw is then the context figure, where the
	// model has one.
	base := d.idleW
	if l.process {
		base = max(base, d.ctxW)
	}
	power := base + (m.MaxPowerW-base)*l.power + jitter*nz.sym(chPower+50)
	if fs.power {
		power = m.PowerLimitW * (0.985 + 0.01*nz.unit(chPower+51))
	}
	return clamp(power, d.idleW*0.85, m.PowerLimitW*1.02)
}

// integrate advances the counters that depend on the path, not just the
// instant (energy, NVLink bytes), to ns.
func (s *Source) integrate(d *simDevice, l *load, power float64, ns int64) {
	if !d.init {
		d.init = true
		d.energyMJ = 1e9 + 4e9*unit(s.seed, d.id, 0xe9e)
		d.nvlinkBW = 0
		d.lastNs = ns
	} else if ns > d.lastNs {
		dt := float64(ns-d.lastNs) / 1e9
		d.energyMJ += power * dt * 1000
		d.nvlinkBW += l.nvlink * d.model.NVLinkGBps * 1e9 / 1024 * dt // KiB, like DCGM's counter
		d.lastNs = ns
	}
}

// errorSamples appends the error counters (XID, ECC, retired pages, row
// remapping, PCIe replays, NVLink's) as the faults have set them.
func errorSamples(out []source.Sample, d *simDevice, fs *faultState) []source.Sample {
	add := func(met *schema.Metric, v float64) {
		out = append(out, source.Sample{Metric: met, Value: v})
	}
	add(schema.XIDLast, float64(fs.xidLast))
	add(schema.ECCSBEVol, 0)
	add(schema.ECCDBEVol, float64(fs.dbe))
	add(schema.ECCSBEAgg, 0)
	add(schema.ECCDBEAgg, float64(fs.dbe))
	add(schema.RetiredSBE, 0)
	add(schema.RetiredDBE, float64(fs.dbe))
	add(schema.RetiredPending, float64(btoi(fs.retiredPending)))
	add(schema.RemapCorr, 0)
	add(schema.RemapUncorr, float64(fs.dbe+fs.remapFailures))
	add(schema.RemapFailure, float64(btoi(fs.remapFailed)))
	add(schema.RemapPending, float64(btoi(fs.remapPending)))
	add(schema.PCIeReplay, float64(fs.pcieReplays))
	if d.model.NVLinks > 0 {
		add(schema.NVLinkBW, float64(int64(d.nvlinkBW)))
		add(schema.NVLinkCRCFlit, float64(fs.nvFlit))
		add(schema.NVLinkCRCData, float64(fs.nvData))
		add(schema.NVLinkReplay, float64(fs.nvReplay))
		add(schema.NVLinkRecovery, float64(fs.nvRecovery))
	}
	return out
}

// profSamples appends the DCGM_FI_PROF_* fields.
func profSamples(out []source.Sample, d *simDevice, l *load) []source.Sample {
	add := func(met *schema.Metric, v float64) {
		out = append(out, source.Sample{Metric: met, Value: float64(int64(v*1e4)) / 1e4})
	}
	m := d.model
	add(schema.ProfGrEngineActive, l.gr)
	add(schema.ProfSMActive, l.sm)
	add(schema.ProfSMOccupancy, l.occ)
	add(schema.ProfTensorActive, l.tensor)
	add(schema.ProfDRAMActive, l.dram)
	add(schema.ProfFP64Active, l.fp64)
	add(schema.ProfFP32Active, l.fp32)
	add(schema.ProfFP16Active, l.fp16)
	pcie := l.pcie * m.PCIeGBps * 1e9
	out = append(out, source.Sample{Metric: schema.ProfPCIeTX, Value: float64(int64(pcie * 0.4))},
		source.Sample{Metric: schema.ProfPCIeRX, Value: float64(int64(pcie * 0.6))})
	if m.NVLinks > 0 && d.mig == nil {
		nv := l.nvlink * m.NVLinkGBps * 1e9 / 2
		out = append(out, source.Sample{Metric: schema.ProfNVLinkTX, Value: float64(int64(nv))},
			source.Sample{Metric: schema.ProfNVLinkRX, Value: float64(int64(nv))})
	}
	return out
}

// migSamples are what a MIG GPU instance publishes: memory and the
// profiling fields (DCGM reports no GPU_UTIL, power or clocks per instance).
func migSamples(d *simDevice, l *load) []source.Sample {
	out := make([]source.Sample, 0, 16)
	used := float64(int(l.memGiB * 1024))
	out = append(out,
		source.Sample{Metric: schema.FBUsed, Value: used},
		source.Sample{Metric: schema.FBFree, Value: d.memMiB - used},
		source.Sample{Metric: schema.FBReserved, Value: 0},
	)
	return profSamples(out, d, l)
}
