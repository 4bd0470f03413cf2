// Package accounting defines gpuwatch's GPU-hour accounting, once: what
// allocated, used, wasted, over-limit and orphaned GPU-hours mean for a
// window. The terminal summary, the web page, the reports, `gpuwatch
// analyze` and the analyzer's /metrics all read their figures from here, so
// the same window shows the same numbers everywhere.
//
// The definitions, per allocation (host and job) and window [From, To):
//
//   - Allocated: GPUs held × time, over the analyzer steps that start in
//     the window, counted by the share of each step with samples.
//   - Wasted: what the allocation's findings attribute to a waste pattern,
//     each clipped to the window, at most Allocated. Findings of one
//     allocation may overlap in time (an idle session that is also stuck);
//     when their sum exceeds Allocated, each is scaled down alike.
//     Spin-waiting reads busy but counts here, never in Used.
//   - Used: the steps with GPU activity (spin-wait excluded), at most
//     Allocated − Wasted: a lightly used GPU's waste (low utilization) is
//     taken out of its use, so Used + Wasted ≤ Allocated always holds. What
//     remains is allocated time neither used nor judged waste (short idle
//     spells, steps with too few samples to judge).
//   - OverLimit: GPU-hours past a run-time limit (the overlong pattern's
//     evidence). Its own total: a busy job over its limit uses its GPUs,
//     and an idle one's waste is already counted by the idle patterns.
//   - Degraded: GPU-hours an allocation ran slowed by its GPUs (the
//     straggler and throttled patterns' evidence degraded_gpu_hours: the
//     estimated time lost times the GPUs that waited). Its own total, never
//     waste: the job used its GPUs, they ran slow.
//   - Orphan: GPU-hours held by processes of no live job. No allocation
//     holds them, so they are counted apart from Allocated and Wasted.
package accounting

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// EvidenceOverLimit is the evidence key under which an overlong finding
// carries its GPU-hours past the limit.
const EvidenceOverLimit = "over_limit_gpu_hours"

// Totals are the accounting of a window, in GPU-hours.
type Totals struct {
	Allocated float64 `json:"allocated_gpu_hours"`
	Used      float64 `json:"used_gpu_hours"`
	Wasted    float64 `json:"wasted_gpu_hours"`
	OverLimit float64 `json:"over_limit_gpu_hours"`
	Degraded  float64 `json:"degraded_gpu_hours"`
	Orphan    float64 `json:"orphan_gpu_hours"`
}

// WastedShare is Wasted / Allocated (0 when nothing was allocated).
func (t Totals) WastedShare() float64 {
	if t.Allocated <= 0 {
		return 0
	}
	return t.Wasted / t.Allocated
}

// Line says the totals in one sentence, as every text surface prints them.
func (t Totals) Line() string {
	s := fmt.Sprintf("GPU-hours: %s allocated, %s used, %s wasted (%s of allocated), %s over the limit",
		gh(t.Allocated), gh(t.Used), gh(t.Wasted), pct(t.Wasted, t.Allocated), gh(t.OverLimit))
	if t.Degraded > 0 {
		s += fmt.Sprintf("; %s degraded (slowed by throttled or faulty GPUs)", gh(t.Degraded))
	}
	if t.Orphan > 0 {
		s += fmt.Sprintf("; %s more held by orphaned processes", gh(t.Orphan))
	}
	return s
}

func gh(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func pct(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(100*a/b, 'f', 1, 64) + "%"
}

// Unjudged is allocated time neither used nor wasted.
func (t Totals) Unjudged() float64 { return math.Max(0, t.Allocated-t.Used-t.Wasted) }

// Entry is one finding's part of a window's totals.
type Entry struct {
	Finding *finding.Finding
	// Wasted (allocations' waste), OverLimit and Orphan GPU-hours the
	// finding adds to the window; at most one of Wasted and Orphan is set.
	Wasted, OverLimit, Degraded, Orphan float64
}

// Allocation is one allocation's accounting in the window.
type Allocation struct {
	Hostname, Job, Team, User string
	Totals
	// Active is the raw GPU-active time before waste is taken out.
	Active float64
	// WholeGPUHours is the allocation's GPUs times its usage intervals,
	// each GPU counted whole: Allocated / WholeGPUHours is its share of
	// the GPUs it held (below 1 on a time-sliced GPU).
	WholeGPUHours float64 `json:"-"`
}

// sharedBelow is the share under which an allocation held shares of
// shared GPUs: one alone on its GPUs holds 1, and one that shared a
// single step at a window's edge stays a hair under.
const sharedBelow = 0.99

// Share is the part of its GPUs' time the allocation held: 1 on GPUs of
// its own, a quarter as one of four holders of a time-sliced GPU (1 when
// it has no hours).
func (a *Allocation) Share() float64 {
	if a.WholeGPUHours <= 0 {
		return 1
	}
	return min(1, a.Allocated/a.WholeGPUHours)
}

// Shared reports whether the allocation held shares of shared GPUs
// (time-slicing, MPS, a HAMi quota) rather than GPUs of its own.
func (a *Allocation) Shared() bool { return a.Allocated > 0 && a.Share() < sharedBelow }

// Book is the accounting of a window.
type Book struct {
	From, To time.Time
	Totals
	Entries     []Entry
	Allocations map[string]*Allocation // by Key(hostname, job)
}

// UsedShare is the part of an allocation's active time that counts as used
// (1 when nothing was taken out), so that per-day or per-user splits of
// active time sum to the book's Used.
func (b *Book) UsedShare(hostname, job string) float64 {
	a := b.Allocations[Key(hostname, job)]
	if a == nil || a.Active <= 0 {
		return 1
	}
	return a.Used / a.Active
}

// Key names an allocation.
func Key(hostname, job string) string { return hostname + "|" + job }

// Ledger collects intervals and findings for one window, then closes into
// a Book. A finding added twice under the same key keeps the newer one.
type Ledger struct {
	from, to time.Time
	allocs   map[string]*Allocation
	last     map[string]time.Time // newest interval start per allocation
	findings map[string]*finding.Finding
	order    []string
	settled  Totals
}

// NewLedger starts the accounting of [from, to).
func NewLedger(from, to time.Time) *Ledger {
	return &Ledger{from: from, to: to, allocs: map[string]*Allocation{}, last: map[string]time.Time{},
		findings: map[string]*finding.Finding{}}
}

// AddUsage counts a usage interval (one analyzer step of an allocation, or
// a sum of them) that starts in the window.
func (l *Ledger) AddUsage(u *store.Usage) {
	if u.Start.Before(l.from) || !u.Start.Before(l.to) {
		return
	}
	k := Key(u.Hostname, u.Job)
	a := l.allocs[k]
	if a == nil {
		a = &Allocation{Hostname: u.Hostname, Job: u.Job}
		l.allocs[k] = a
	}
	if a.Team == "" {
		a.Team = u.Team
	}
	if a.User == "" {
		a.User = u.User
	}
	a.Allocated += u.AllocatedGPUHours
	a.Active += u.ActiveGPUHours
	a.WholeGPUHours += float64(u.GPUs) * u.End.Sub(u.Start).Hours()
	if u.Start.After(l.last[k]) {
		l.last[k] = u.Start
	}
}

// AddFinding counts a finding's part in the window.
func (l *Ledger) AddFinding(f *finding.Finding) {
	k := f.Key()
	if _, ok := l.findings[k]; !ok {
		l.order = append(l.order, k)
	}
	l.findings[k] = f
}

// RemoveFinding forgets a finding (a verdict the analyzer withdrew).
func (l *Ledger) RemoveFinding(key string) {
	if _, ok := l.findings[key]; !ok {
		return
	}
	delete(l.findings, key)
	keep := l.order[:0]
	for _, k := range l.order {
		if k != key {
			keep = append(keep, k)
		}
	}
	l.order = keep
}

// Close computes the book; the ledger stays open for more.
func (l *Ledger) Close() *Book {
	fs := make([]*finding.Finding, 0, len(l.order))
	for _, k := range l.order {
		fs = append(fs, l.findings[k])
	}
	b := account(l.from, l.to, l.allocs, fs)
	b.Allocated += l.settled.Allocated
	b.Used += l.settled.Used
	b.Wasted += l.settled.Wasted
	b.OverLimit += l.settled.OverLimit
	b.Degraded += l.settled.Degraded
	b.Orphan += l.settled.Orphan
	return b
}

// Settle closes the accounts of allocations with no interval since before,
// and of orphans that ended before it: their totals are kept, their
// intervals and findings dropped, so that a long-running ledger holds the
// live fleet only. A finding of a settled allocation that arrives later
// finds nothing allocated to waste.
func (l *Ledger) Settle(before time.Time) {
	done := map[string]*Allocation{}
	for k, a := range l.allocs {
		if l.last[k].Before(before) {
			done[k] = a
		}
	}
	var fs []*finding.Finding
	keep := l.order[:0]
	for _, k := range l.order {
		f := l.findings[k]
		_, gone := done[Key(f.Hostname, f.Job)]
		if gone || (f.Pattern == schema.OrphanProcess && f.End.Before(before)) {
			fs = append(fs, f)
			delete(l.findings, k)
			continue
		}
		keep = append(keep, k)
	}
	l.order = keep
	if len(done) == 0 && len(fs) == 0 {
		return
	}
	t := account(l.from, l.to, done, fs).Totals
	l.settled.Allocated += t.Allocated
	l.settled.Used += t.Used
	l.settled.Wasted += t.Wasted
	l.settled.OverLimit += t.OverLimit
	l.settled.Degraded += t.Degraded
	l.settled.Orphan += t.Orphan
	for k := range done {
		delete(l.allocs, k)
		delete(l.last, k)
	}
}

// account applies the definitions to allocations and their findings.
func account(from, to time.Time, allocs map[string]*Allocation, fs []*finding.Finding) *Book {
	b := &Book{From: from, To: to, Allocations: allocs}
	raw := map[string]float64{}
	for _, f := range fs {
		share := Clip(f.Start, f.End, from, to)
		e := Entry{Finding: f}
		switch {
		case f.Pattern == schema.OrphanProcess:
			e.Orphan = share * f.WastedGPUHours
		default:
			e.Wasted = share * f.WastedGPUHours
			e.OverLimit = share * f.Evidence[EvidenceOverLimit]
			e.Degraded = share * f.Evidence[schema.EvidenceDegraded]
			raw[Key(f.Hostname, f.Job)] += e.Wasted
		}
		if e.Wasted <= 0 && e.OverLimit <= 0 && e.Degraded <= 0 && e.Orphan <= 0 {
			continue
		}
		b.Entries = append(b.Entries, e)
	}
	for k, a := range allocs {
		a.Wasted = math.Min(raw[k], a.Allocated)
		a.Used = math.Max(0, math.Min(a.Active, a.Allocated-a.Wasted))
		a.OverLimit, a.Degraded, a.Orphan = 0, 0, 0
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Orphan > 0 {
			b.Orphan += e.Orphan
			continue
		}
		k := Key(e.Finding.Hostname, e.Finding.Job)
		a := allocs[k]
		if a == nil {
			// No interval of this allocation in the window: nothing was
			// allocated there for the finding to waste.
			e.Wasted, e.OverLimit, e.Degraded = 0, 0, 0
			continue
		}
		if r := raw[k]; r > a.Wasted {
			e.Wasted *= a.Wasted / r
		}
		e.OverLimit = math.Min(e.OverLimit, a.Allocated)
		a.OverLimit += e.OverLimit
		e.Degraded = math.Min(e.Degraded, a.Allocated-a.Degraded)
		a.Degraded += e.Degraded
	}
	keys := make([]string, 0, len(allocs))
	for k := range allocs {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a stable order of float sums
	for _, k := range keys {
		a := allocs[k]
		b.Allocated += a.Allocated
		b.Used += a.Used
		b.Wasted += a.Wasted
		b.OverLimit += a.OverLimit
		b.Degraded += a.Degraded
	}
	return b
}

// Build is the book of [from, to) over usage intervals and findings.
func Build(from, to time.Time, usage []store.Usage, fs []finding.Finding) *Book {
	l := NewLedger(from, to)
	for i := range usage {
		l.AddUsage(&usage[i])
	}
	for i := range fs {
		l.AddFinding(&fs[i])
	}
	return l.Close()
}

// Clip is the part of [start, end) that falls in [from, to), as a share of
// it; a finding of no duration counts whole when its end is in the window.
func Clip(start, end, from, to time.Time) float64 {
	if !end.After(start) {
		if !end.Before(from) && end.Before(to) {
			return 1
		}
		return 0
	}
	return Overlap(start, end, from, to).Seconds() / end.Sub(start).Seconds()
}

// Overlap is how much of [a0, a1) falls in [b0, b1).
func Overlap(a0, a1, b0, b1 time.Time) time.Duration {
	lo, hi := a0, a1
	if b0.After(lo) {
		lo = b0
	}
	if b1.Before(hi) {
		hi = b1
	}
	if !hi.After(lo) {
		return 0
	}
	return hi.Sub(lo)
}
