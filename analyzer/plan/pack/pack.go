// Package pack puts demands on the fewest GPUs, two ways: time-slicing (or
// MPS), where co-located demands share the whole GPU and their hourly
// compute profiles add up, so services whose peaks do not coincide share
// one GPU; and MIG, where each demand gets a GPU instance of a fixed profile
// and the instances of a GPU must be placeable by the hardware. Both use
// first-fit decreasing, the proven heuristic for (vector) bin packing
// (time-slicing also tries a complement fill, for peaks at different hours);
// Optimum finds the true minimum of small cases by exhaustive search, so a
// test can state the heuristic's gap.
package pack

import (
	"math"
	"sort"
	"strconv"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
)

// Demand is one thing to place: hourly compute (fraction of a whole GPU, at
// the quantile the plan sizes for; 0 where absent), hourly peak compute
// (for contention), memory in MiB and the hours it is present.
type Demand struct {
	ID      string
	Compute []float64
	Peak    []float64
	Memory  float64
	Present []bool
	// Profile is the MIG profile the demand fits, "" when none does.
	Profile string
	// Owner is whose work the demand is (TimeSliceByOwner co-locates only
	// one owner's demands); "" is an owner no other demand shares.
	Owner string
}

// Capacity of one GPU for time-slicing: compute share (≤ 1, less leaves
// headroom) and memory in MiB.
type Capacity struct {
	Compute float64
	Memory  float64
}

// Bin is one GPU of a plan.
type Bin struct {
	Items []int // indexes into the demands
	// Layout is the MIG layout (MIG plans only).
	Layout []mig.Instance
	load   []float64
	peak   []float64
	mem    []float64
}

// P95Load is the highest hourly sum of the sized compute (time-slicing).
func (b *Bin) P95Load() float64 { return maxOf(b.load) }

// ContendedHours counts the hours whose summed peaks exceed the whole GPU:
// the hours when co-located work would wait for each other.
func (b *Bin) ContendedHours() int {
	n := 0
	for _, x := range b.peak {
		if x > 1 {
			n++
		}
	}
	return n
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func size(d *Demand, c Capacity) float64 {
	return maxOf(d.Compute)/c.Compute + d.Memory/c.Memory
}

// span is the range of hours [first, last] a demand is present in, and
// the present hour of its most compute (the first of equals); a demand
// present in no hour has first > last.
type span struct{ first, last, heavy int }

func spanOf(d *Demand) span {
	s := span{len(d.Compute), -1, -1}
	for h := range d.Compute {
		if d.Present != nil && (h >= len(d.Present) || !d.Present[h]) {
			continue
		}
		s.first = min(s.first, h)
		s.last = h
		if s.heavy < 0 || d.Compute[h] > d.Compute[s.heavy] {
			s.heavy = h
		}
	}
	return s
}

// refuses says whether a GPU with load l and memory m at hour h cannot
// take d there: an exact test of one hour of fits, cheap enough to try on
// every GPU's column before the whole profile.
func refuses(d *Demand, h int, l, m float64, c Capacity) bool {
	return (l > 0 || m > 0) && (l+d.Compute[h] > c.Compute+1e-9 || m+d.Memory > c.Memory+1e-9)
}

func (b *Bin) fits(d *Demand, sp span, c Capacity) bool {
	// Only the hours the demand is present in matter: a week of short jobs
	// is checked against a day's hours each, not the whole week's.
	for h := sp.first; h <= sp.last; h++ {
		if d.Present != nil && !d.Present[h] {
			continue
		}
		if b.mem[h] == 0 && b.load[h] == 0 {
			continue // alone on the GPU in this hour: a demand always fits itself
		}
		if b.load[h]+d.Compute[h] > c.Compute+1e-9 || b.mem[h]+d.Memory > c.Memory+1e-9 {
			return false
		}
	}
	return true
}

func (b *Bin) add(i int, d *Demand) {
	b.Items = append(b.Items, i)
	for h := range d.Compute {
		if d.Present != nil && !d.Present[h] {
			continue
		}
		b.load[h] += d.Compute[h]
		if h < len(d.Peak) {
			b.peak[h] += d.Peak[h]
		}
		b.mem[h] += d.Memory
	}
}

// TimeSlice packs demands for time-slicing two ways over the same
// decreasing order: first fit, and a complement fill, which opens a GPU
// with the largest demand left and adds, while any fits, the one that
// raises the GPU's worst hour least, so that work whose peaks fall at
// different hours (a day service and a night one) shares a GPU before work
// that peaks together does. It returns the packing with fewer GPUs, and of
// two with as many the one whose GPUs' worst hours sum lower: first fit may
// pair two day services just under the target load, where day with night
// would peak at half of it. A demand larger than one GPU on its own gets a
// GPU to itself. All demands must have profiles of the same length.
func TimeSlice(ds []Demand, c Capacity) []Bin {
	order, spans := decreasing(ds, c)
	ff := timeSlice(ds, c, order, spans)
	if len(ds)*len(ds)*hoursOf(ds) > complementBudget {
		return ff
	}
	cf := complementFill(ds, c, order, spans)
	if len(cf) < len(ff) || (len(cf) == len(ff) && sumPeaks(cf) < sumPeaks(ff)-1e-9) {
		return cf
	}
	return ff
}

// TimeSliceByOwner packs each owner's demands by TimeSlice on GPUs of
// their own: tenants of a time-sliced GPU share its memory and its faults
// (one out-of-memory or Xid error reaches all), which one owner may accept
// for its own work but not impose on another's. A demand with no owner is
// packed alone. Owners may still follow one another on a GPU (a job that
// ends, another that starts the next day): bins whose hours never meet are
// then joined, which shares nothing at once. Bins index ds.
func TimeSliceByOwner(ds []Demand, c Capacity) []Bin {
	return followOneAnother(byOwner(ds, c))
}

// followOneAnother joins, first fit in order, bins that are never busy in
// the same hour.
func followOneAnother(bins []Bin) []Bin {
	var out []Bin
	var busy [][]uint64
	for _, b := range bins {
		hb := busyHours(&b)
		placed := false
		for k := range out {
			if !meet(busy[k], hb) {
				out[k].join(&b)
				for w := range hb {
					busy[k][w] |= hb[w]
				}
				placed = true
				break
			}
		}
		if !placed {
			out = append(out, b)
			busy = append(busy, hb)
		}
	}
	return out
}

// busyHours is the bit set of the hours a bin holds work in.
func busyHours(b *Bin) []uint64 {
	set := make([]uint64, (len(b.load)+63)/64)
	for h := range b.load {
		if b.load[h] > 0 || b.mem[h] > 0 {
			set[h/64] |= 1 << (h % 64)
		}
	}
	return set
}

func meet(a, b []uint64) bool {
	for w := range a {
		if a[w]&b[w] != 0 {
			return true
		}
	}
	return false
}

// join adds o's work to b (hours that never meet, so nothing adds up).
func (b *Bin) join(o *Bin) {
	b.Items = append(b.Items, o.Items...)
	for h := range b.load {
		b.load[h] += o.load[h]
		b.peak[h] += o.peak[h]
		b.mem[h] += o.mem[h]
	}
}

// byOwner is TimeSlice of each owner's demands apart, in the order of the
// owners' names.
func byOwner(ds []Demand, c Capacity) []Bin {
	groups := map[string][]int{}
	var owners []string
	for i := range ds {
		o := ds[i].Owner
		if o == "" {
			o = "\x00" + strconv.Itoa(i) // a group of its own, which no name can be
		}
		if _, ok := groups[o]; !ok {
			owners = append(owners, o)
		}
		groups[o] = append(groups[o], i)
	}
	sort.Strings(owners)
	var out []Bin
	for _, o := range owners {
		idx := groups[o]
		sub := make([]Demand, len(idx))
		for k, i := range idx {
			sub[k] = ds[i]
		}
		for _, b := range TimeSlice(sub, c) {
			for k, i := range b.Items {
				b.Items[k] = idx[i]
			}
			out = append(out, b)
		}
	}
	return out
}

// complementBudget bounds the complement fill, which weighs every demand
// left for every place on a GPU (demands² × hours), at about a second of
// work: a pool of some 1,500 time-sliced demands over a week, 4,000 over a
// day. Larger pools keep first fit.
const complementBudget = 400_000_000

func hoursOf(ds []Demand) int {
	if len(ds) == 0 {
		return 0
	}
	return len(ds[0].Compute)
}

func sumPeaks(bins []Bin) float64 {
	var s float64
	for i := range bins {
		s += bins[i].P95Load()
	}
	return s
}

// decreasing orders the demands by size, largest first.
func decreasing(ds []Demand, c Capacity) ([]int, []span) {
	order := make([]int, len(ds))
	sizes := make([]float64, len(ds))
	spans := make([]span, len(ds))
	for i := range order {
		order[i] = i
		sizes[i] = size(&ds[i], c)
		spans[i] = spanOf(&ds[i])
	}
	sort.SliceStable(order, func(a, b int) bool { return sizes[order[a]] > sizes[order[b]] })
	return order, spans
}

// peakWith is the bin's worst hour with d added, and whether d fits;
// it stops early, unfit, once that hour reaches bound.
func (b *Bin) peakWith(d *Demand, sp span, c Capacity, bound float64) (float64, bool) {
	peak := 0.0
	for h := range b.load {
		l := b.load[h]
		if h >= sp.first && h <= sp.last && (d.Present == nil || d.Present[h]) {
			if (b.mem[h] > 0 || l > 0) && (l+d.Compute[h] > c.Compute+1e-9 || b.mem[h]+d.Memory > c.Memory+1e-9) {
				return 0, false
			}
			l += d.Compute[h]
		}
		peak = max(peak, l)
		if peak >= bound {
			return peak, false
		}
	}
	return peak, true
}

// timeSlice places the demands in order, each on the first GPU that
// takes it.
func timeSlice(ds []Demand, c Capacity, order []int, spans []span) []Bin {
	hours := hoursOf(ds)
	cols := newColumns(hours)
	var bins []Bin
	for _, i := range order {
		d := &ds[i]
		sp := spans[i]
		placed := -1
		for k := 0; k < len(bins); k++ {
			if sp.first > sp.last {
				placed = k
				break
			}
			if b := k / binBlock; k%binBlock == 0 && (cols.blockRefuses(d, sp.first, b, c) || cols.blockRefuses(d, sp.heavy, b, c)) {
				k += binBlock - 1
				continue
			}
			// A GPU full at the demand's first hour or at its heaviest
			// refuses it; most GPUs that cannot take it are full at one of
			// the two, and a column is read without touching their profiles.
			if cols.refuses(d, sp.first, k, c) || cols.refuses(d, sp.heavy, k, c) {
				continue
			}
			if bins[k].fits(d, sp, c) {
				placed = k
				break
			}
		}
		if placed < 0 {
			bins = append(bins, newBin(hours))
			cols.open()
			placed = len(bins) - 1
		}
		bins[placed].add(i, d)
		for h := sp.first; h <= sp.last && h < hours; h++ {
			cols.set(h, placed, bins[placed].load[h], bins[placed].mem[h])
		}
	}
	return bins
}

// binBlock is the number of GPUs whose least load and memory at each hour
// timeSlice keeps together.
const binBlock = 64

func newBin(hours int) Bin {
	return Bin{load: make([]float64, hours), peak: make([]float64, hours), mem: make([]float64, hours)}
}

// complementFill fills one GPU at a time: the largest demand left opens
// it, then the demand that raises its worst hour least joins, until none
// fits. The rise, not the resulting peak, is what weighs: a night service
// on a GPU whose worst hour is by day costs it next to nothing.
func complementFill(ds []Demand, c Capacity, order []int, spans []span) []Bin {
	left := append([]int(nil), order...)
	var bins []Bin
	for len(left) > 0 {
		b := newBin(hoursOf(ds))
		b.add(left[0], &ds[left[0]])
		left = left[1:]
		for {
			before := b.P95Load()
			pick, rise := -1, math.Inf(1)
			for j, i := range left {
				if p, ok := b.peakWith(&ds[i], spans[i], c, before+rise); ok && p-before < rise-1e-12 {
					pick, rise = j, p-before
				}
			}
			if pick < 0 {
				break
			}
			b.add(left[pick], &ds[left[pick]])
			left = append(left[:pick], left[pick+1:]...)
		}
		bins = append(bins, b)
	}
	return bins
}

// MIG packs demands that each fit a profile of model g into MIG layouts by
// first-fit decreasing over (compute slices, memory slices); a GPU takes a
// demand only when the layout with it is placeable (mig.Model.Place).
// Demands with no profile are not placed; they are returned as rest.
func MIG(ds []Demand, g *mig.Model) (bins []Bin, rest []int) {
	type cand struct {
		i int
		p *mig.Profile
	}
	var cs []cand
	for i := range ds {
		p, ok := g.Profile(ds[i].Profile)
		if !ok {
			rest = append(rest, i)
			continue
		}
		cs = append(cs, cand{i, p})
	}
	sort.SliceStable(cs, func(a, b int) bool {
		x, y := cs[a].p, cs[b].p
		if x.Compute != y.Compute {
			return x.Compute > y.Compute
		}
		return x.Memory > y.Memory
	})
	names := [][]string{}
	// Slices used per GPU: a GPU without room for the instance's slices is
	// passed over without asking Place, which searches placements.
	type used struct{ compute, memory int }
	room := []used{}
	for _, c := range cs {
		placed := false
		for k := range bins {
			if room[k].compute+c.p.Compute > g.ComputeSlices || room[k].memory+c.p.Memory > g.MemorySlices {
				continue
			}
			try := append(append([]string(nil), names[k]...), c.p.Name)
			if layout, ok := g.Place(try); ok {
				names[k] = try
				room[k].compute += c.p.Compute
				room[k].memory += c.p.Memory
				bins[k].Items = append(bins[k].Items, c.i)
				bins[k].Layout = layout
				placed = true
				break
			}
		}
		if !placed {
			layout, _ := g.Place([]string{c.p.Name})
			names = append(names, []string{c.p.Name})
			room = append(room, used{c.p.Compute, c.p.Memory})
			bins = append(bins, Bin{Items: []int{c.i}, Layout: layout})
		}
	}
	return bins, rest
}

// FitsTogether reports whether the demands share one GPU by time-slicing.
func FitsTogether(ds []Demand, idx []int, c Capacity) bool {
	if len(idx) == 0 {
		return true
	}
	n := len(ds[idx[0]].Compute)
	b := Bin{load: make([]float64, n), peak: make([]float64, n), mem: make([]float64, n)}
	for k, i := range idx {
		if k > 0 && !b.fits(&ds[i], spanOf(&ds[i]), c) {
			return false
		}
		b.add(i, &ds[i])
	}
	return true
}

// Optimum returns the least number of groups that partition n items so
// that fits accepts every group, by exhaustive search; for small n only
// (it grows like the Bell numbers).
func Optimum(n int, fits func(idx []int) bool) int {
	best := n
	groups := [][]int{}
	var rec func(i int)
	rec = func(i int) {
		if len(groups) >= best {
			return
		}
		if i == n {
			best = len(groups)
			return
		}
		for g := range groups {
			groups[g] = append(groups[g], i)
			if fits(groups[g]) {
				rec(i + 1)
			}
			groups[g] = groups[g][:len(groups[g])-1]
		}
		groups = append(groups, []int{i})
		if fits(groups[len(groups)-1]) {
			rec(i + 1)
		}
		groups = groups[:len(groups)-1]
	}
	rec(0)
	return best
}
