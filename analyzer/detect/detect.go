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
	Open                      map[finding.Pattern]*finding.Finding
	Closed                    []finding.Finding
	StartupReported, Unknown  bool
	LastStep                  time.Time
}

// OrphanState tracks one orphaned process.
type OrphanState struct {
	features.Orphan
	Since, LastSeen time.Time
}

// State is everything the detectors carry from one step to the next.
type State struct {
	// Origin is the start of the first step ever processed: an allocation
	// already running then has an unknown start.
	Origin  time.Time
	Allocs  map[string]*Alloc
	Orphans map[string]*OrphanState
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Allocs: map[string]*Alloc{}, Orphans: map[string]*OrphanState{}}
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
}

// Detector applies one configuration.
type Detector struct{ cfg config.Config }

// New returns a detector.
func New(cfg config.Config) *Detector { return &Detector{cfg: cfg} }

// AllocKey is the key of State.Allocs.
func AllocKey(host, job string) string { return host + "|" + job }

// DefaultAction and severity of each pattern. Reclaim-level actions are for
// patterns whose evidence is unambiguous once the thresholds hold.
var defaults = map[finding.Pattern]struct {
	sev finding.Severity
	act finding.Action
}{
	finding.CPUOnly:         {finding.Critical, finding.ActionReclaim},
	finding.IdleSession:     {finding.Warning, finding.ActionReclaim},
	finding.Stuck:           {finding.Critical, finding.ActionReclaim},
	finding.OrphanProcess:   {finding.Critical, finding.ActionKill},
	finding.OverRequested:   {finding.Warning, finding.ActionResize},
	finding.LowUtilization:  {finding.Info, finding.ActionResize},
	finding.StartupOverhead: {finding.Info, finding.ActionNotify},
	finding.Overlong:        {finding.Warning, finding.ActionCheckpoint},
}

// DefaultAction returns the action recommended for a pattern.
func DefaultAction(p finding.Pattern) finding.Action { return defaults[p].act }

// Cumulative patterns judge an allocation's whole history, so their verdict
// at the last known step supersedes earlier ones (a daily-cycle service looks
// light for its first night only).
func Cumulative(p finding.Pattern) bool {
	return p == finding.LowUtilization || p == finding.OverRequested
}

// Step advances st by one step of features.
func (d *Detector) Step(st *State, s features.Step) Result {
	var res Result
	if st.Origin.IsZero() || s.Start.Before(st.Origin) {
		st.Origin = s.Start
	}
	stepH := s.End.Sub(s.Start).Hours()
	known := func(dev string) bool {
		return s.Expected > 0 && s.DeviceSamples[dev] >= float64(d.cfg.MinCoverage)*s.Expected
	}
	// Group this step's rows by allocation.
	rows := map[string][]features.GPU{}
	for _, g := range s.GPUs {
		if g.Job == "" {
			continue
		}
		k := AllocKey(g.Host, g.Job)
		rows[k] = append(rows[k], g)
	}
	// Allocations not seen this step: ended if their devices report without
	// them, unknown if their devices are silent.
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
		if allKnown {
			d.end(a)
			continue
		}
		d.unknown(a, s)
		res.Unknown = append(res.Unknown, k)
	}
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		gs := rows[k]
		a := st.Allocs[k]
		if a == nil || a.Ended {
			a = d.newAlloc(st, s, gs, known)
			st.Allocs[k] = a
		}
		d.meta(a, s, gs)
		a.LastSeen, a.LastStep = s.End, s.End
		u := store.Usage{Start: s.Start, End: s.End, Hostname: a.Host, Job: a.Job, User: a.User, Team: a.Team,
			Kind: a.Kind, Model: a.Model}
		unknown := false
		seen := map[string]bool{}
		for _, g := range gs {
			seen[g.Device] = true
			// A device with neither util nor SM activity cannot be judged.
			if !known(features.DeviceID(g.Host, g.Device)) || (!g.HasUtil && !g.HasSM) {
				unknown = true
			}
		}
		for dev := range a.GPUs {
			if !seen[dev] && !known(features.DeviceID(a.Host, dev)) {
				unknown = true
			}
		}
		allIdle, anyActive, held, allSpin := true, false, false, true
		for _, g := range gs {
			frac := math.Min(1, g.Samples/math.Max(s.Expected, 1))
			act := d.active(g)
			u.GPUs++
			u.AllocatedGPUHours += frac * stepH
			if act && !unknown {
				u.ActiveGPUHours += frac * stepH
			}
			if act {
				allIdle = false
				anyActive = true
			}
			if g.HasFB && g.FBMaxMiB > d.cfg.Idle.MemoryHeldMiB {
				held = true
			}
			if !d.spin(g) {
				allSpin = false
			}
			if !unknown {
				d.gpu(a, g, act)
			}
		}
		res.Usage = append(res.Usage, u)
		if unknown {
			d.unknown(a, s)
			res.Unknown = append(res.Unknown, k)
			continue
		}
		a.Unknown = false
		a.KnownSteps++
		a.KnownHours += stepH
		runStart := s.Start
		if a.KnownSteps == 1 {
			runStart = a.Start
		}
		if anyActive && a.FirstActive.IsZero() {
			a.FirstActive = runStart
		}
		a.IdleSince = run(a.IdleSince, allIdle, runStart)
		a.IdleHeldSince = run(a.IdleHeldSince, allIdle && held, runStart)
		a.SpinSince = run(a.SpinSince, allSpin, runStart)
		res.Open = append(res.Open, d.evaluate(a, s.End)...)
	}
	res.Open = append(res.Open, d.orphans(st, s)...)
	return res
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

// active decides whether a GPU did work in a step. SM activity is preferred
// when exported; power above the veto overrides an idle reading.
func (d *Detector) active(g features.GPU) bool {
	idle := true
	if g.HasUtil {
		idle = g.UtilMax <= float64(d.cfg.Idle.UtilPercent)
	}
	if g.HasSM {
		idle = idle && g.SMAvg < float64(d.cfg.Idle.SMActive)
	}
	if g.HasPower && g.PowerRatio > float64(d.cfg.Idle.PowerVetoRatio) {
		idle = false
	}
	return !idle
}

// spin is the hung-collective signature: util pinned high while power sits
// near idle and (where profiled) SMs and DRAM do nothing. Without power and
// profiling data there is no way to tell a spin from real work: not a spin.
func (d *Detector) spin(g features.GPU) bool {
	c := d.cfg.Patterns.Stuck
	if !g.HasUtil || (!g.HasPower && !g.HasSM) {
		return false
	}
	if g.UtilAvg < float64(c.SpinUtilPercent) {
		return false
	}
	if g.HasPower && g.PowerRatio > float64(c.SpinPowerRatio) {
		return false
	}
	if g.HasSM && g.SMAvg > float64(c.SpinSMActive) {
		return false
	}
	if g.HasDRAM && g.DRAMAvg > float64(c.SpinDRAMActive) {
		return false
	}
	return true
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
	if g.HasSM || !g.HasUtil {
		r, gs.UsesSM = g.SMAvg, true
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
		GPUs: map[string]*GPUState{}, Open: map[finding.Pattern]*finding.Finding{}}
	frac := 0.0
	for _, x := range gs {
		frac = math.Max(frac, x.Samples/math.Max(s.Expected, 1))
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
		a.Scheduler = "slurm"
	} else {
		a.Scheduler = "kubernetes"
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

func (d *Detector) end(a *Alloc) {
	a.Ended = true
	for p, f := range a.Open {
		a.Closed = append(a.Closed, *f)
		delete(a.Open, p)
	}
}

func (d *Detector) base(a *Alloc, p finding.Pattern) finding.Finding {
	f := finding.Finding{Pattern: p, Severity: defaults[p].sev, Action: defaults[p].act,
		Job: a.Job, User: a.User, Team: a.Team, Kind: a.Kind, Hostname: a.Host, Scheduler: a.Scheduler,
		Account: a.Account, JobName: a.JobName, Namespace: a.Namespace, Pod: a.Pod, ModelName: a.Model,
		Evidence: map[string]float64{}}
	for dev := range a.GPUs {
		f.GPUs = append(f.GPUs, dev)
	}
	sort.Strings(f.GPUs)
	return f
}

func hours(from, to time.Time) float64 { return to.Sub(from).Hours() }

// evaluate runs every detector on a at t and updates its open findings.
func (d *Detector) evaluate(a *Alloc, t time.Time) []finding.Finding {
	c := d.cfg.Patterns
	n := float64(len(a.GPUs))
	hits := map[finding.Pattern]*finding.Finding{}
	hit := func(p finding.Pattern, from time.Time, wasted float64, ev map[string]float64, advice string) {
		f := d.base(a, p)
		f.Start, f.End, f.WastedGPUHours, f.Advice = from, t, round(wasted), advice
		for k, v := range ev {
			f.Evidence[k] = round(v)
		}
		hits[p] = &f
	}
	var fbMax, fbTotal float64
	for _, g := range a.GPUs {
		fbMax = math.Max(fbMax, g.FBMaxMiB)
		fbTotal = math.Max(fbTotal, g.FBTotalMiB)
	}
	interactive := a.Kind == KindInteractive
	// cpu_only: never a sign of GPU use since the start. When the start was
	// not observed the job may have worked before, so it must also never
	// have held memory.
	if !c.CPUOnly.Disabled && !interactive && a.FirstActive.IsZero() && !a.IdleSince.IsZero() &&
		a.IdleSince.Equal(a.Start) && t.Sub(a.IdleSince) >= c.CPUOnly.MinDuration.D() &&
		(a.StartKnown || fbMax <= d.cfg.Idle.MemoryHeldMiB) {
		hit(finding.CPUOnly, a.IdleSince, n*hours(a.IdleSince, t), map[string]float64{
			"idle_minutes": t.Sub(a.IdleSince).Minutes(), "gpus": n, "fb_max_mib": fbMax,
			"threshold_minutes": c.CPUOnly.MinDuration.D().Minutes()},
			fmt.Sprintf("No GPU activity on %d GPU(s) for %s since the job started: run it on CPU nodes or release the GPUs.", len(a.GPUs), dur(t.Sub(a.IdleSince))))
	}
	// idle_session: an interactive session idle for long.
	if !c.IdleSession.Disabled && interactive && !a.IdleSince.IsZero() && t.Sub(a.IdleSince) >= c.IdleSession.MinDuration.D() {
		hit(finding.IdleSession, a.IdleSince, n*hours(a.IdleSince, t), map[string]float64{
			"idle_minutes": t.Sub(a.IdleSince).Minutes(), "gpus": n, "fb_max_mib": fbMax,
			"threshold_minutes": c.IdleSession.MinDuration.D().Minutes()},
			fmt.Sprintf("Interactive session idle for %s: save your work and end it, or it will be reclaimed.", dur(t.Sub(a.IdleSince))))
	}
	// stuck: idle with memory held after activity, or spinning.
	if !c.Stuck.Disabled {
		switch {
		case !a.SpinSince.IsZero() && t.Sub(a.SpinSince) >= c.Stuck.SpinDuration.D():
			hit(finding.Stuck, a.SpinSince, n*hours(a.SpinSince, t), map[string]float64{
				"spin_minutes": t.Sub(a.SpinSince).Minutes(), "gpus": n,
				"threshold_minutes": c.Stuck.SpinDuration.D().Minutes()},
				fmt.Sprintf("GPUs pinned near 100%% util at near-idle power for %s: a collective is spin-waiting (hung rank or NCCL timeout).", dur(t.Sub(a.SpinSince))))
		case !interactive && !a.FirstActive.IsZero() && !a.IdleHeldSince.IsZero() && t.Sub(a.IdleHeldSince) >= c.Stuck.IdleDuration.D():
			hit(finding.Stuck, a.IdleHeldSince, n*hours(a.IdleHeldSince, t), map[string]float64{
				"idle_minutes": t.Sub(a.IdleHeldSince).Minutes(), "gpus": n, "fb_max_mib": fbMax,
				"threshold_minutes": c.Stuck.IdleDuration.D().Minutes()},
				fmt.Sprintf("GPU activity stopped %s ago while memory is still held: the job looks hung.", dur(t.Sub(a.IdleHeldSince))))
		}
	}
	// startup_overhead: a one-off once the first activity is seen.
	var oneOff []finding.Finding
	if !c.StartupOverhead.Disabled && !interactive && !a.StartupReported && a.StartKnown && !a.FirstActive.IsZero() {
		a.StartupReported = true
		if delay := a.FirstActive.Sub(a.Start); delay >= c.StartupOverhead.MinDelay.D() {
			f := d.base(a, finding.StartupOverhead)
			f.Start, f.End, f.WastedGPUHours = a.Start, a.FirstActive, round(n*delay.Hours())
			f.Evidence["delay_minutes"] = round(delay.Minutes())
			f.Evidence["gpus"] = n
			f.Evidence["threshold_minutes"] = c.StartupOverhead.MinDelay.D().Minutes()
			f.Advice = fmt.Sprintf("GPUs held %s before first use: stage data and pull images before requesting GPUs.", dur(delay))
			a.Closed = append(a.Closed, f)
			oneOff = append(oneOff, f)
		}
	}
	// over_requested and low_utilization judge per-GPU history.
	var idleGPUs, usedGPUs float64
	lowAll, lowAny := true, false
	var sumRatio, peak, steps float64
	usesSM := false
	for _, g := range a.GPUs {
		if g.KnownSteps == 0 {
			lowAll = false
			continue
		}
		ratio := float64(g.ActiveSteps) / float64(g.KnownSteps)
		if ratio <= float64(c.OverRequested.MaxActiveRatio) {
			idleGPUs++
		} else {
			usedGPUs++
		}
		mean := g.SumRatio / float64(g.KnownSteps)
		limit := float64(c.LowUtilization.MaxMeanUtilPercent) / 100
		if g.UsesSM {
			limit, usesSM = float64(c.LowUtilization.MaxMeanSMActive), true
		}
		if ratio >= 0.5 && mean < limit && g.PeakRatio <= float64(c.LowUtilization.MaxPeakRatio) &&
			g.FBTotalMiB > 0 && g.FBMaxMiB <= float64(c.LowUtilization.MaxMemoryRatio)*g.FBTotalMiB {
			lowAny = true
		} else {
			lowAll = false
		}
		sumRatio += g.SumRatio
		steps += float64(g.KnownSteps)
		peak = math.Max(peak, g.PeakRatio)
	}
	knownH := a.KnownHours
	if !c.OverRequested.Disabled && n >= 2 && idleGPUs >= 1 && usedGPUs >= 1 && knownH >= c.OverRequested.MinDuration.D().Hours() {
		hit(finding.OverRequested, a.Start, idleGPUs*knownH, map[string]float64{
			"gpus": n, "idle_gpus": idleGPUs, "known_hours": knownH,
			"max_active_ratio": float64(c.OverRequested.MaxActiveRatio)},
			fmt.Sprintf("%d of %d GPUs unused: request %d.", int(idleGPUs), int(n), int(usedGPUs)))
	}
	if !c.LowUtilization.Disabled && lowAll && lowAny && knownH >= c.LowUtilization.MinDuration.D().Hours() {
		mean := sumRatio / steps
		ev := map[string]float64{"gpus": n, "known_hours": knownH, "peak_step_ratio": peak,
			"fb_max_mib": fbMax, "fb_total_mib": fbTotal}
		if usesSM {
			ev["mean_sm_active"] = mean
		} else {
			ev["mean_util_percent"] = mean * 100
		}
		hit(finding.LowUtilization, a.Start, n*knownH*(1-mean), ev,
			fmt.Sprintf("Mean use %.0f%% of %d GPU(s), peak memory %.0f of %.0f MiB: a MIG slice or a smaller GPU would do.", mean*100, int(n), fbMax, fbTotal))
	}
	// overlong: past the kind's maximum run time.
	if maxRun, ok := c.Overlong.MaxRuntime[a.Kind]; ok && !c.Overlong.Disabled && a.StartKnown {
		if limit := a.Start.Add(maxRun.D()); t.After(limit) {
			hit(finding.Overlong, limit, n*hours(limit, t), map[string]float64{
				"runtime_hours": hours(a.Start, t), "max_runtime_hours": maxRun.D().Hours(), "gpus": n},
				fmt.Sprintf("Running %s, past the %s limit for %s jobs: checkpoint and release.", dur(t.Sub(a.Start)), dur(maxRun.D()), a.Kind))
		}
	}
	// Update open episodes: a condition that stopped closes its episode.
	for p, f := range a.Open {
		if _, ok := hits[p]; !ok {
			if !Cumulative(p) {
				a.Closed = append(a.Closed, *f)
			}
			delete(a.Open, p)
		}
	}
	out := oneOff
	for _, p := range finding.Patterns {
		f, ok := hits[p]
		if !ok {
			continue
		}
		if prev, ok := a.Open[p]; ok && !Cumulative(p) && prev.Start.Before(f.Start) {
			f.Start = prev.Start
		}
		a.Open[p] = f
		out = append(out, *f)
	}
	return out
}

// orphans tracks orphaned processes: present in this step or gone (an
// absent series ends the episode, which can only suppress a finding).
func (d *Detector) orphans(st *State, s features.Step) []finding.Finding {
	c := d.cfg.Patterns.OrphanProcess
	seen := map[string]bool{}
	for _, o := range s.Orphans {
		k := o.Host + "|" + o.Device + "|" + o.PID
		seen[k] = true
		if cur, ok := st.Orphans[k]; ok {
			cur.LastSeen = s.End
			cur.Orphan = o
			continue
		}
		st.Orphans[k] = &OrphanState{Orphan: o, Since: s.Start, LastSeen: s.End}
	}
	for k := range st.Orphans {
		if !seen[k] {
			delete(st.Orphans, k)
		}
	}
	if c.Disabled {
		return nil
	}
	// One finding per host and job: a job's leftover processes are one mess.
	byJob := map[string]*finding.Finding{}
	keys := make([]string, 0, len(st.Orphans))
	for k := range st.Orphans {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o := st.Orphans[k]
		if s.End.Sub(o.Since) < c.MinDuration.D() {
			continue
		}
		job := o.Job
		if job == "" {
			job = "orphan:" + o.Device
		}
		fk := o.Host + "|" + job
		f := byJob[fk]
		if f == nil {
			f = &finding.Finding{Pattern: finding.OrphanProcess, Severity: defaults[finding.OrphanProcess].sev,
				Action: defaults[finding.OrphanProcess].act, Job: job, User: o.User, Hostname: o.Host, ModelName: o.Model,
				Start: o.Since, End: s.End, Evidence: map[string]float64{"threshold_minutes": c.MinDuration.D().Minutes()}}
			byJob[fk] = f
		}
		if !contains(f.GPUs, o.Device) {
			f.GPUs = append(f.GPUs, o.Device)
		}
		var pid int
		if _, err := fmt.Sscanf(o.PID, "%d", &pid); err == nil {
			f.PIDs = append(f.PIDs, pid)
		}
		if o.Since.Before(f.Start) {
			f.Start = o.Since
		}
		f.WastedGPUHours = round(f.WastedGPUHours + hours(o.Since, s.End))
		f.Evidence["orphan_minutes"] = round(math.Max(f.Evidence["orphan_minutes"], s.End.Sub(o.Since).Minutes()))
		f.Evidence["processes"]++
		f.Advice = fmt.Sprintf("Process %s (%s) holds GPU memory with no live job: kill it.", o.PID, o.Command)
	}
	out := make([]finding.Finding, 0, len(byJob))
	for _, f := range byJob {
		sort.Strings(f.GPUs)
		sort.Ints(f.PIDs)
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

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
		for _, p := range finding.Patterns {
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
