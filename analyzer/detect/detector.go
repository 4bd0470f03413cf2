package detect

import (
	"math"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Detector applies one configuration.
type Detector struct {
	cfg config.Config
	// on is the registered judges the configuration leaves on, in Specs'
	// order, and faultOn whether gpu_fault is: read once, because every
	// allocation is judged at every step and Disabled walks the
	// configuration by reflection.
	on      []Spec
	faultOn bool
}

// New returns a detector.
func New(cfg config.Config) *Detector {
	d := &Detector{cfg: cfg, faultOn: !cfg.Patterns.Disabled(string(schema.GPUFault))}
	for _, s := range Specs() {
		if s.judge != nil && !cfg.Patterns.Disabled(string(s.Pattern)) {
			d.on = append(d.on, s)
		}
	}
	return d
}

// AllocKey is the key of State.Allocs.
func AllocKey(host, job string) string { return host + "|" + job }

// Step advances st by one step of features.
func (d *Detector) Step(st *State, s features.Step) Result {
	var res Result
	if st.Origin.IsZero() || s.Start.Before(st.Origin) {
		st.Origin = s.Start
	}
	known := func(dev string) bool { return s.Known(dev, float64(d.cfg.MinCoverage)) }
	if st.Floors == nil {
		st.Floors = FloorBook{}
	}
	rows := d.groupRows(st, s, known)
	d.endMissing(st, s, rows, known, &res)
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.stepAlloc(st, s, k, rows[k], known, &res)
	}
	st.rememberLevels(s)
	res.Open = append(res.Open, d.orphans(st, s)...)
	return res
}

// groupRows groups this step's rows by allocation; every known row,
// allocated or not, teaches its model's idle floor.
func (d *Detector) groupRows(st *State, s features.Step, known func(string) bool) map[string][]features.GPU {
	rows := map[string][]features.GPU{}
	for _, g := range s.GPUs {
		if known(features.DeviceID(g.Host, g.Device)) {
			st.Floors.observe(g, d.cfg.Idle)
		}
		if g.Job == "" {
			continue
		}
		k := AllocKey(g.Host, g.Job)
		rows[k] = append(rows[k], g)
	}
	return rows
}

// endMissing handles the allocations not seen this step: ended if their
// devices report without them, unknown if their devices are silent.
func (d *Detector) endMissing(st *State, s features.Step, rows map[string][]features.GPU, known func(string) bool, res *Result) {
	for k, a := range st.Allocs {
		if _, ok := rows[k]; ok || a.Ended {
			continue
		}
		allKnown := true
		for dev := range a.GPUs {
			if !known(features.DeviceID(a.Host, dev)) {
				allKnown = false
			}
		}
		if allKnown || d.endedOfFault(a, s, known) {
			if f := d.end(a); f != nil {
				res.Ended = append(res.Ended, *f)
			}
			continue
		}
		d.unknown(a, s)
		res.Unknown = append(res.Unknown, k)
	}
}

// stepAlloc advances allocation k by its rows gs of this step: its usage,
// its GPUs' state, and, when the step is known for all its GPUs, its runs
// and findings.
func (d *Detector) stepAlloc(st *State, s features.Step, k string, gs []features.GPU, known func(string) bool, res *Result) {
	a := st.Allocs[k]
	if a == nil || a.Ended {
		a = d.newAlloc(st, s, gs, known)
		st.Allocs[k] = a
	}
	d.meta(st, a, s, gs)
	if l, ok := st.TimeLimits[a.Job]; ok && a.Scheduler == schema.SchedulerSlurm {
		a.TimeLimit = l
	}
	a.LastSeen, a.LastStep = s.End, s.End
	u := store.Usage{Start: s.Start, End: s.End, Hostname: a.Host, Job: a.Job, User: a.User, Team: a.Team,
		Kind: a.Kind, Model: a.Model}
	unknown := allocUnknown(a, gs, known)
	act := d.stepGPUs(st, a, s, gs, unknown, &u)
	res.Usage = append(res.Usage, u)
	if unknown {
		d.unknown(a, s)
		res.Unknown = append(res.Unknown, k)
		return
	}
	d.advanceRuns(st, a, s, act, res)
}

// allocUnknown reports whether the step cannot be judged for allocation a:
// one of its GPUs is not known, or has no activity signal (util, SM or
// graphics engine).
func allocUnknown(a *Alloc, gs []features.GPU, known func(string) bool) bool {
	unknown := false
	seen := map[string]bool{}
	for _, g := range gs {
		seen[g.Device] = true
		if !known(features.DeviceID(g.Host, g.Device)) || (!g.HasUtil && !g.HasSM && !g.HasGR) {
			unknown = true
		}
	}
	for dev := range a.GPUs {
		if !seen[dev] && !known(features.DeviceID(a.Host, dev)) {
			unknown = true
		}
	}
	return unknown
}

// stepActivity is what an allocation's GPUs did in one step.
type stepActivity struct {
	allIdle, anyActive, held, allSpin bool
	// undetermined: a GPU's activity could not be told (a holder of a
	// busy shared GPU without its own use, sharedBusy): neither idle nor
	// active, it ends every idle run and may have been the first use.
	undetermined bool
	// gpuHours is what the allocation held in the step by the
	// accounting's share of each GPU (its usage's allocated GPU-hours).
	gpuHours float64
}

// stepGPUs adds each of the allocation's GPUs' step to its usage u and its
// GPU state (activity only when the step is known), and returns what the
// GPUs did together.
func (d *Detector) stepGPUs(st *State, a *Alloc, s features.Step, gs []features.GPU, unknown bool, u *store.Usage) stepActivity {
	stepH := s.End.Sub(s.Start).Hours()
	act := stepActivity{allIdle: true, allSpin: true}
	for _, dev := range gs {
		// A shared device's holder is judged on its own use; its health
		// is the device's.
		g := ownView(dev)
		frac := s.Share(features.DeviceID(g.Host, g.Device), g.Samples)
		undetermined := d.sharedBusy(g)
		active, spinning := false, false
		if undetermined {
			act.allIdle, act.undetermined = false, true
		} else {
			active, spinning = d.active(st, g), d.spin(st, g)
		}
		u.GPUs++
		u.AllocatedGPUHours += frac * stepH
		act.gpuHours += frac * stepH
		// A spin-waiting GPU reads busy and does nothing: wasted, not used.
		if active && !spinning && !unknown {
			u.ActiveGPUHours += frac * stepH
		}
		if active {
			act.allIdle = false
			act.anyActive = true
		}
		if g.HasFB && g.FBMaxMiB > d.cfg.Idle.MemoryHeldMiB {
			act.held = true
		}
		if !spinning {
			act.allSpin = false
		}
		bounded := undetermined && d.lightBound(g)
		if !unknown && (!undetermined || bounded) {
			// A shared device used lightly bounds each holder's use: light
			// use is judged of it (never idle: counted as activity).
			d.gpu(a, g, active || bounded, frac*stepH)
		}
		gst := a.GPUs[g.Device]
		if gst == nil {
			gst = &GPUState{UUID: g.UUID, Model: g.Model}
			a.GPUs[g.Device] = gst
		}
		if undetermined && !bounded && !unknown {
			gst.Undetermined++
		}
		d.observeHealth(st, gst, dev, s.End, s.End.Sub(s.Start), frac*stepH, active && !unknown)
	}
	return act
}

// advanceRuns advances a known step of allocation a: its first activity,
// its idle, idle-held and spin runs, and the findings they make.
func (d *Detector) advanceRuns(st *State, a *Alloc, s features.Step, act stepActivity, res *Result) {
	a.Unknown = false
	a.KnownSteps++
	a.KnownHours += s.End.Sub(s.Start).Hours()
	if !s.End.After(st.Window) {
		a.KnownLeadHours = a.KnownHours
	}
	runStart := s.Start
	if a.KnownSteps == 1 {
		runStart = a.Start
	}
	// A step whose activity could not be told may hold the first use: an
	// earlier first use never makes a startup delay or a CPU-only job.
	firstActiveNow, firstAt := (act.anyActive || act.undetermined) && a.FirstActive.IsZero(), 0.0
	if firstActiveNow {
		a.FirstActive = runStart
		if a.KnownSteps > 1 {
			// Work began somewhere in this step, after an idle one: its
			// middle is the unbiased guess, where its start would
			// shorten every staging delay by half a step.
			a.FirstActive = runStart.Add(s.End.Sub(s.Start) / 2)
			firstAt = 0.5
		}
	}
	resumed := act.anyActive && !a.IdleHeldSince.IsZero() && a.clock(a.IdleHeldSince, runStart) >= d.cfg.Patterns.Stuck.IdleDuration.D()
	a.IdleSince = run(a.IdleSince, act.allIdle, runStart)
	a.IdleHeldSince = run(a.IdleHeldSince, act.allIdle && act.held, runStart)
	a.SpinSince = run(a.SpinSince, act.allSpin, runStart)
	a.accrue(act.gpuHours, runStart, firstActiveNow, firstAt)
	a.forgetGaps()
	if resumed {
		a.Resumes++
	}
	res.Open = append(res.Open, d.evaluate(a, s.End, st.Window, &res.Withdrawn)...)
	if resumed {
		forgetIdleStuck(a)
	}
}

func run(since time.Time, cond bool, at time.Time) time.Time {
	switch {
	case !cond:
		return time.Time{}
	case since.IsZero():
		return at
	default:
		return since
	}
}

// active decides whether a GPU did work in a step: its mean util above the
// idle threshold (a mean, not every sample: an idle context reads a percent
// or two now and then), SM activity where exported, graphics-engine
// activity on MIG instances (which have no util of their own); power too far
// above its model's idle floor overrides an idle reading: judged against
// the floor, not as a share of the limit, since a board holding contexts
// draws a model-specific share of its TDP (FloorBook).
func (d *Detector) active(st *State, g features.GPU) bool {
	idle := true
	if g.HasUtil {
		idle = g.UtilAvg <= float64(d.cfg.Idle.UtilPercent)
	}
	switch {
	case g.HasSM:
		idle = idle && g.SMAvg < float64(d.cfg.Idle.SMActive)
	case g.HasGR && !g.HasUtil:
		idle = idle && g.GRAvg < float64(d.cfg.Idle.SMActive)
	}
	if r, ok := st.Floors.aboveFloor(g, d.cfg.Idle); ok && r > float64(d.cfg.Idle.PowerVetoAboveFloor) {
		idle = false
	}
	return !idle
}

// forgetIdleStuck drops an allocation's stuck-idle episodes once its
// activity came back by itself: a hung job does not resume, a service
// between requests does.
func forgetIdleStuck(a *Alloc) {
	kept := a.Closed[:0]
	for _, f := range a.Closed {
		if f.Pattern == schema.Stuck && f.Evidence["idle_minutes"] > 0 {
			continue
		}
		kept = append(kept, f)
	}
	a.Closed = kept
}

func (d *Detector) gpu(a *Alloc, g features.GPU, act bool, held float64) {
	gs := a.GPUs[g.Device]
	if gs == nil {
		gs = &GPUState{UUID: g.UUID, Model: g.Model}
		a.GPUs[g.Device] = gs
	}
	gs.KnownSteps++
	gs.HeldHours += held
	if act {
		gs.ActiveSteps++
	}
	r := g.UtilAvg / 100
	switch {
	case g.HasSM:
		r, gs.UsesSM = g.SMAvg, true
	case !g.HasUtil:
		r, gs.UsesSM = g.GRAvg, true
	}
	gs.SumRatio += r
	gs.PeakRatio = math.Max(gs.PeakRatio, r)
	gs.PeakUtil = math.Max(gs.PeakUtil, g.UtilMax)
	if g.HasFB {
		gs.FBMaxMiB = math.Max(gs.FBMaxMiB, g.FBMaxMiB)
		gs.FBTotalMiB = math.Max(gs.FBTotalMiB, g.FBTotalMiB)
	}
}

func (d *Detector) newAlloc(st *State, s features.Step, gs []features.GPU, known func(string) bool) *Alloc {
	g := gs[0]
	a := &Alloc{Host: g.Host, Job: g.Job, Cluster: g.Cluster, Namespace: g.NS, Pod: g.Pod, Model: g.Model,
		GPUs: map[string]*GPUState{}, Open: map[schema.Pattern]*finding.Finding{}, Held: HeldHours{Tracked: true, PerGPU: true}}
	frac := 0.0
	for _, x := range gs {
		frac = math.Max(frac, s.Share(features.DeviceID(x.Host, x.Device), x.Samples))
		if _, ok := a.GPUs[x.Device]; !ok {
			a.GPUs[x.Device] = &GPUState{UUID: x.UUID, Model: x.Model}
		}
	}
	frac = math.Min(frac, 1)
	a.Start = s.End.Add(-time.Duration(frac * float64(s.End.Sub(s.Start))))
	// Seen in the first step ever read, and for all of it, it may have
	// started long before; seen on a device without data before, it may
	// have too. Then runtime-based patterns must not use Start.
	devKnown := true
	for _, x := range gs {
		devKnown = devKnown && known(features.DeviceID(x.Host, x.Device))
	}
	a.StartKnown = devKnown && (s.Start.After(st.Origin) || frac < 0.9)
	if g.HPCJob != "" {
		a.Scheduler = schema.SchedulerSlurm
	} else {
		a.Scheduler = schema.SchedulerKubernetes
	}
	return a
}

// KindFromInfo is the KindSource of a kind gpuwatch_allocation_info
// carried: the exporter's name rules (the teams file's kinds).
const KindFromInfo = "name, gpuwatch_allocation_info"

// meta fills owner and kind: the kind from the workload's owner when its
// scheduler said (st.OwnerKinds), else from gpuwatch_allocation_info, or
// from names when the data comes from a stock dcgm-exporter.
func (d *Detector) meta(st *State, a *Alloc, s features.Step, gs []features.GPU) {
	defer ownerKind(st, a)
	for _, g := range gs {
		in, ok := s.Info[features.DeviceID(g.Host, g.Device)+"|"+g.Job]
		if !ok {
			continue
		}
		a.User, a.Team, a.Account, a.JobName = in.User, in.Team, in.Account, in.JobName
		if in.Kind != "" && !ownerDecided(a) {
			a.Kind, a.KindSource = in.Kind, KindFromInfo
		}
		if in.Scheduler != "" {
			a.Scheduler = in.Scheduler
		}
		break
	}
	if a.Kind == "" {
		k, u := GuessKind(a.Pod, a.JobName)
		a.Kind, a.KindSource = k, "name"
		if a.User == "" {
			a.User = u
		}
	}
	if a.Team == "" && a.Namespace != "" {
		// Kubernetes namespaces are per team in most fleets; without an
		// allocation_info it is the best owner there is.
		a.Team = a.Namespace
	}
}

// unknown marks a step without data for allocation a: a gap that pauses
// its runs' clocks and ends nothing. Ending the runs here would make one
// exporter restart reset "idle since it started" and split one episode's
// hours at every outage.
func (d *Detector) unknown(a *Alloc, s features.Step) {
	a.Unknown = true
	a.UnknownSteps++
	a.LastStep = s.End
	a.pause(s.Start, s.End)
}

// end closes the allocation's findings and returns its gpu_fault when the
// end was attributed to it.
func (d *Detector) end(a *Alloc) *finding.Finding {
	a.Ended = true
	d.attributeEnd(a)
	var attributed *finding.Finding
	if f := a.Open[schema.GPUFault]; f != nil && f.Evidence["ended_by_fault"] > 0 {
		c := *f
		attributed = &c
	}
	for p, f := range a.Open {
		a.Closed = append(a.Closed, *f)
		delete(a.Open, p)
	}
	return attributed
}

// ownerKind sets the kind the owner decided, when its scheduler said. An
// owner that could not say (o.Kind empty: JupyterHub unreachable) leaves
// the kind last decided by an owner, else unknown (""), never a name's.
func ownerKind(st *State, a *Alloc) {
	key := a.Job
	if a.Scheduler == schema.SchedulerKubernetes && a.Namespace != "" && a.Pod != "" {
		key = a.Namespace + "/" + a.Pod
	}
	o, ok := st.OwnerKinds[key]
	switch {
	case !ok:
	case o.Kind != "":
		a.Kind, a.KindSource = o.Kind, o.Source
	case o.Source != "" && !ownerDecided(a):
		a.Kind, a.KindSource = "", o.Source
	}
}

// ownerDecided reports whether a's kind came from its owner, which no
// name or allocation_info may change afterwards.
func ownerDecided(a *Alloc) bool {
	return a.KindSource != "" && a.KindSource != "name" && a.KindSource != KindFromInfo
}
