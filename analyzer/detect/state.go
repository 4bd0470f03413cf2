// Package detect turns per-step GPU features into waste findings. It keeps
// one State per fleet (allocations, their runs of idleness or spinning, the
// findings open on them) and advances it one step at a time, so the one-shot
// analysis and the daemon's incremental cycles run the very same logic; the
// engine persists the State between cycles.
//
// Missing data is never idleness, and never use: a step in which any GPU of
// an allocation lacks data is unknown for that allocation. It pauses every
// run's clock (the gap counts toward no duration and no GPU-hours), ends no
// run and no episode, and yields no finding; a job never seen working before
// a gap is still never seen working after it.
package detect

import (
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
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
	// HeldHours is the GPU-hours the allocation held this GPU in its known
	// steps, by the accounting's share of it (HeldHours.PerGPU).
	HeldHours float64 `json:"held_hours,omitempty"`
	// Health is the GPU's throttling and faults (health.go).
	Health GPUHealth `json:"health,omitzero"`
	// Undetermined counts the known steps in which the GPU's activity for
	// this holder could not be told (a busy shared GPU without the
	// holder's own use): none of the counts above includes them.
	Undetermined int `json:"undetermined,omitempty"`
}

// Alloc is one allocation (host, job) and what the detectors remember of it.
type Alloc struct {
	Host, Job                 string
	Scheduler, Namespace, Pod string
	User, Team, Kind, Account string
	JobName, Model            string
	// KindSource says what decided Kind (see finding.Finding.KindSource).
	KindSource               string               `json:",omitempty"`
	GPUs                     map[string]*GPUState // by device key
	Start                    time.Time
	StartKnown               bool
	LastSeen                 time.Time
	FirstActive              time.Time
	IdleSince, IdleHeldSince time.Time
	SpinSince                time.Time
	KnownSteps, UnknownSteps int
	KnownHours               float64
	Ended                    bool
	Open                     map[schema.Pattern]*finding.Finding
	Closed                   []finding.Finding
	Unknown                  bool
	LastStep                 time.Time
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
	// Cluster is the cluster label of the allocation's series.
	Cluster string `json:",omitempty"`
	// Held is the GPU-hours held by the accounting's share of each GPU,
	// and where each run began in it (share.go).
	Held HeldHours `json:",omitzero"`
	// Gaps are the spans of the allocation's unknown steps since its
	// oldest open run began: they pause every run's clock (clock leaves
	// them out) and end none.
	Gaps []Span `json:",omitempty"`
	// KnownLeadHours is KnownHours at the start of the counted window
	// (State.Window): the known time the cumulative patterns judged that
	// is the warm-up's, not the window's.
	KnownLeadHours float64 `json:",omitempty"`
}

// Span is a stretch of time [From, To).
type Span struct {
	From, To time.Time
}

// pause records [from, to) as a gap of the allocation.
func (a *Alloc) pause(from, to time.Time) {
	if n := len(a.Gaps); n > 0 && !a.Gaps[n-1].To.Before(from) {
		if to.After(a.Gaps[n-1].To) {
			a.Gaps[n-1].To = to
		}
		return
	}
	a.Gaps = append(a.Gaps, Span{From: from, To: to})
}

// clock is the known time in [from, to): the wall time less the gaps in it.
func (a *Alloc) clock(from, to time.Time) time.Duration {
	if !to.After(from) {
		return 0
	}
	d := to.Sub(from)
	for _, g := range a.Gaps {
		lo, hi := g.From, g.To
		if from.After(lo) {
			lo = from
		}
		if to.Before(hi) {
			hi = to
		}
		if hi.After(lo) {
			d -= hi.Sub(lo)
		}
	}
	return d
}

// forgetGaps drops the gaps that end before every open run began: no
// clock can reach them any more (a run that starts later starts after them).
func (a *Alloc) forgetGaps() {
	var oldest time.Time
	for _, t := range []time.Time{a.IdleSince, a.IdleHeldSince, a.SpinSince} {
		if !t.IsZero() && (oldest.IsZero() || t.Before(oldest)) {
			oldest = t
		}
	}
	keep := a.Gaps[:0]
	for _, g := range a.Gaps {
		if !oldest.IsZero() && g.To.After(oldest) {
			keep = append(keep, g)
		}
	}
	a.Gaps = keep
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
	// Floors is every GPU model's idle floor of power, learnt from the
	// fleet's idle steps.
	Floors FloorBook
	// Window, when set, is the start of the window whose waste is counted
	// (gpuwatch analyze's --from): steps before it inform every judgement
	// (how long a GPU has been idle, that it was never used), but each
	// finding's GPU-hours and start are clipped to it. Zero (the daemon)
	// counts every step read.
	Window time.Time `json:"-"`
	// TimeLimits holds the run-time limit of each batch job (by hpc_job id)
	// as its scheduler reported it for the steps being read; the allocation
	// keeps the last one it was told.
	TimeLimits map[string]time.Duration `json:"-"`
	// OwnerKinds holds the kinds the workloads' owners decided (by
	// hpc_job id, or namespace/pod), as the schedulers reported them for
	// the steps being read; they outrank allocation_info and names, and the
	// allocation keeps the last one it was told.
	OwnerKinds map[string]OwnerKind `json:"-"`
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
	return &State{Allocs: map[string]*Alloc{}, Orphans: map[string]*OrphanState{}, Floors: FloorBook{}, Memory: features.NewMemory()}
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

// OwnerKind is a kind the workload's owner decided, and which owner fact
// did ("owner Notebook kubeflow.org/v1 research/nb-1", "Slurm batch flag").
type OwnerKind struct{ Kind, Source string }
