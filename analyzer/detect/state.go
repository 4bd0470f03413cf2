// Package detect turns per-step GPU features into waste findings. It keeps
// one State per fleet (allocations, their runs of idleness or spinning, the
// findings open on them) and advances it one step at a time, so the one-shot
// analysis and the daemon's incremental cycles run the very same logic; the
// engine persists the State between cycles.
//
// Missing data is never idleness: a step in which any GPU of an allocation
// lacks data is unknown for that allocation; it breaks every run of
// idleness, closes what was open and yields no finding.
package detect

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// GPUState accumulates one GPU of an allocation.
type GPUState struct {
	UUID        string  `json:"uuid"`
	Model       string  `json:"model"`
	KnownSteps  int     `json:"known_steps"`
	ActiveSteps int     `json:"active_steps"`
	SumRatio    float64 `json:"sum_ratio"`  // sum of step means (SM activity, else util/100)
	PeakRatio   float64 `json:"peak_ratio"` // highest step mean
	UsesSM      bool    `json:"uses_sm"`
	FBMaxMiB    float64 `json:"fb_max_mib"`
	FBTotalMiB  float64 `json:"fb_total_mib"`
	PeakUtil    float64 `json:"peak_util"`
	// Health is the GPU's throttling and faults (health.go).
	Health GPUHealth `json:"health,omitzero"`
}

// Alloc is one allocation (host, job) and what the detectors remember of it.
type Alloc struct {
	Host, Job                 string
	Scheduler, Namespace, Pod string
	User, Team, Kind, Account string
	JobName, Model            string
	GPUs                      map[string]*GPUState // by device key
	Start                     time.Time
	StartKnown                bool
	LastSeen                  time.Time
	FirstActive               time.Time
	IdleSince, IdleHeldSince  time.Time
	SpinSince                 time.Time
	KnownSteps, UnknownSteps  int
	KnownHours                float64
	Ended                     bool
	Open                      map[schema.Pattern]*finding.Finding
	Closed                    []finding.Finding
	Unknown                   bool
	LastStep                  time.Time
	// Reported holds the one-off patterns already judged.
	Reported map[schema.Pattern]bool `json:",omitempty"`
	// Resumes counts the times GPU activity came back after an idle spell
	// long enough to look stuck: activity that keeps coming back is a
	// service's (request-driven, diurnal), not a hang.
	Resumes int `json:",omitempty"`
	// TimeLimit is the run-time limit the job's scheduler last reported
	// (Slurm's time limit); zero while unknown, when overlong falls back
	// to the configured maximum of the job's kind.
	TimeLimit time.Duration `json:",omitempty"`
}

// OrphanState tracks one orphaned process.
type OrphanState struct {
	features.Orphan
	Since, LastSeen time.Time
	// Orphaned is the time it was seen orphaned, counted in scrapes: a
	// step's boundaries would round a process's life up by a step.
	Orphaned time.Duration `json:",omitempty"`
}

// State is everything the detectors carry from one step to the next.
type State struct {
	// Origin is the start of the first step ever processed: an allocation
	// already running then has an unknown start.
	Origin  time.Time
	Allocs  map[string]*Alloc
	Orphans map[string]*OrphanState
	// Power is every GPU's learnt power range.
	Power PowerBook
	// TimeLimits holds the run-time limit of each batch job (by hpc_job id)
	// as its scheduler reported it for the steps being read; the allocation
	// keeps the last one it was told.
	TimeLimits map[string]time.Duration `json:"-"`
	// Memory is what the feature fetches learnt from the data (exporters'
	// pods, each device's cadence), kept with the state between cycles.
	Memory *features.Memory `json:"-"`
	// levels holds each device's last nonzero error-counter levels, the
	// baseline of the next allocation on it (not persisted: after a
	// restart an allocation's first step is its baseline).
	levels map[string]map[string]float64
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Allocs: map[string]*Alloc{}, Orphans: map[string]*OrphanState{}, Power: PowerBook{}, Memory: features.NewMemory()}
}

// Result is what one step produced.
type Result struct {
	// Open holds the findings whose condition holds at the step's end, plus
	// one-off findings (startup_overhead) made in this step.
	Open []finding.Finding
	// Usage has one interval per allocation present in the step.
	Usage []store.Usage
	// Unknown lists the allocations (host|job) whose data was missing.
	Unknown []string
	// Withdrawn lists the cumulative verdicts (low utilization,
	// over-requested) that held at an earlier step and no longer hold: the
	// allocation's whole history now says otherwise, so the earlier verdict
	// is no finding.
	Withdrawn []Withdrawal
	// Ended holds the findings of allocations that ended in this step and
	// were changed by the end: a gpu_fault now marked ended_by_fault. An
	// incremental cycle saves them, since no later step shows them open.
	Ended []finding.Finding
}

// Withdrawal names a withdrawn verdict: its finding key and the start of
// its allocation, since when the verdict may have been recorded.
type Withdrawal struct {
	Key   string
	Since time.Time
}

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
	if st.Power == nil {
		st.Power = PowerBook{}
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

// groupRows groups this step's rows by allocation; every row, allocated or
// not, teaches its GPU's power range.
func (d *Detector) groupRows(st *State, s features.Step, known func(string) bool) map[string][]features.GPU {
	rows := map[string][]features.GPU{}
	for _, g := range s.GPUs {
		if known(features.DeviceID(g.Host, g.Device)) {
			st.Power.observe(g, !d.active(st, g))
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
	d.meta(a, s, gs)
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
	d.advanceRuns(a, s, act, res)
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
}

// stepGPUs adds each of the allocation's GPUs' step to its usage u and its
// GPU state (activity only when the step is known), and returns what the
// GPUs did together.
func (d *Detector) stepGPUs(st *State, a *Alloc, s features.Step, gs []features.GPU, unknown bool, u *store.Usage) stepActivity {
	stepH := s.End.Sub(s.Start).Hours()
	act := stepActivity{allIdle: true, allSpin: true}
	for _, g := range gs {
		frac := s.Share(features.DeviceID(g.Host, g.Device), g.Samples)
		active, spinning := d.active(st, g), d.spin(st, g)
		u.GPUs++
		u.AllocatedGPUHours += frac * stepH
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
		if !unknown {
			d.gpu(a, g, active)
		}
		gst := a.GPUs[g.Device]
		if gst == nil {
			gst = &GPUState{UUID: g.UUID, Model: g.Model}
			a.GPUs[g.Device] = gst
		}
		d.observeHealth(st, gst, g, s.End, s.End.Sub(s.Start), frac*stepH, active && !unknown)
	}
	return act
}

// advanceRuns advances a known step of allocation a: its first activity,
// its idle, idle-held and spin runs, and the findings they make.
func (d *Detector) advanceRuns(a *Alloc, s features.Step, act stepActivity, res *Result) {
	a.Unknown = false
	a.KnownSteps++
	a.KnownHours += s.End.Sub(s.Start).Hours()
	runStart := s.Start
	if a.KnownSteps == 1 {
		runStart = a.Start
	}
	if act.anyActive && a.FirstActive.IsZero() {
		a.FirstActive = runStart
		if a.KnownSteps > 1 {
			// Work began somewhere in this step, after an idle one: its
			// middle is the unbiased guess, where its start would
			// shorten every staging delay by half a step.
			a.FirstActive = runStart.Add(s.End.Sub(s.Start) / 2)
		}
	}
	resumed := act.anyActive && !a.IdleHeldSince.IsZero() && runStart.Sub(a.IdleHeldSince) >= d.cfg.Patterns.Stuck.IdleDuration.D()
	a.IdleSince = run(a.IdleSince, act.allIdle, runStart)
	a.IdleHeldSince = run(a.IdleHeldSince, act.allIdle && act.held, runStart)
	a.SpinSince = run(a.SpinSince, act.allSpin, runStart)
	if resumed {
		a.Resumes++
	}
	res.Open = append(res.Open, d.evaluate(a, s.End, &res.Withdrawn)...)
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
// activity on MIG instances (which have no util of their own); power above
// the veto overrides an idle reading.
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
	if r, ok := st.Power.ratio(g); ok && r > float64(d.cfg.Idle.PowerVetoRatio) {
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

func (d *Detector) gpu(a *Alloc, g features.GPU, act bool) {
	gs := a.GPUs[g.Device]
	if gs == nil {
		gs = &GPUState{UUID: g.UUID, Model: g.Model}
		a.GPUs[g.Device] = gs
	}
	gs.KnownSteps++
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
	a := &Alloc{Host: g.Host, Job: g.Job, Namespace: g.NS, Pod: g.Pod, Model: g.Model,
		GPUs: map[string]*GPUState{}, Open: map[schema.Pattern]*finding.Finding{}}
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

// meta fills owner and kind from gpuwatch_allocation_info, or from names
// when the data comes from a stock dcgm-exporter.
func (d *Detector) meta(a *Alloc, s features.Step, gs []features.GPU) {
	for _, g := range gs {
		in, ok := s.Info[features.DeviceID(g.Host, g.Device)+"|"+g.Job]
		if !ok {
			continue
		}
		a.User, a.Team, a.Account, a.JobName = in.User, in.Team, in.Account, in.JobName
		if in.Kind != "" {
			a.Kind = in.Kind
		}
		if in.Scheduler != "" {
			a.Scheduler = in.Scheduler
		}
		break
	}
	if a.Kind == "" {
		k, u := GuessKind(a.Pod, a.JobName)
		a.Kind = k
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

func (d *Detector) unknown(a *Alloc, s features.Step) {
	a.Unknown = true
	a.UnknownSteps++
	a.LastStep = s.End
	a.IdleSince, a.IdleHeldSince, a.SpinSince = time.Time{}, time.Time{}, time.Time{}
	for p, f := range a.Open {
		if !Cumulative(p) {
			a.Closed = append(a.Closed, *f)
			delete(a.Open, p)
		}
	}
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

func hours(from, to time.Time) float64 { return to.Sub(from).Hours() }

// Findings returns every finding the state holds (closed episodes and open
// ones), merged per key: one allocation's repeated episodes of a pattern
// add their wasted hours under one finding.
func (st *State) Findings(extra []finding.Finding) []finding.Finding {
	merged := map[string]*finding.Finding{}
	var order []string
	add := func(f finding.Finding) {
		k := f.Key()
		m, ok := merged[k]
		if !ok {
			c := f
			c.Evidence = copyMap(f.Evidence)
			c.Evidence["episodes"] = 1
			merged[k] = &c
			order = append(order, k)
			return
		}
		if Cumulative(f.Pattern) {
			ep := m.Evidence["episodes"]
			*m = f
			m.Evidence = copyMap(f.Evidence)
			m.Evidence["episodes"] = ep
			return
		}
		if f.Start.Before(m.Start) {
			m.Start = f.Start
		}
		if f.End.After(m.End) {
			m.End = f.End
			m.Evidence = copyMap(f.Evidence)
		}
		m.WastedGPUHours = round(m.WastedGPUHours + f.WastedGPUHours)
		m.Evidence["episodes"]++
	}
	for _, a := range st.Allocs {
		for _, f := range a.Closed {
			add(f)
		}
		for _, p := range schema.AllPatterns {
			if f, ok := a.Open[p]; ok {
				add(*f)
			}
		}
	}
	for _, f := range extra {
		add(f)
	}
	out := make([]finding.Finding, 0, len(order))
	for _, k := range order {
		out = append(out, *merged[k])
	}
	Sort(out)
	return out
}

// Sort orders findings by GPU-hours wasted, then key, for stable output.
func Sort(fs []finding.Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].WastedGPUHours != fs[j].WastedGPUHours {
			return fs[i].WastedGPUHours > fs[j].WastedGPUHours
		}
		return fs[i].Key() < fs[j].Key()
	})
}

// Prune drops allocations that ended (or went silent) before cutoff, so the
// state of a long-running daemon stays the size of the live fleet.
func (st *State) Prune(cutoff time.Time) {
	for k, a := range st.Allocs {
		if a.LastStep.Before(cutoff) {
			delete(st.Allocs, k)
		}
	}
}

func copyMap(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

func dur(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 || h == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}
