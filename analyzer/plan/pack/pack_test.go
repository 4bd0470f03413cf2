package pack

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
)

// randomDemands draws n demands over 24 hours: a base load, a daily bump at
// a random hour, memory up to half a GPU, and some absent hours.
func randomDemands(rng *rand.Rand, n int) []Demand {
	ds := make([]Demand, n)
	for i := range ds {
		base, amp, at := 0.05+0.25*rng.Float64(), 0.5*rng.Float64(), rng.IntN(24)
		d := Demand{Compute: make([]float64, 24), Peak: make([]float64, 24), Present: make([]bool, 24), Memory: 4000 + 36000*rng.Float64()}
		off := rng.IntN(24)
		for h := range d.Compute {
			x := base + amp*math.Max(0, math.Cos(2*math.Pi*float64(h-at)/24))
			d.Compute[h], d.Peak[h] = x, math.Min(1, 1.2*x)
			d.Present[h] = rng.IntN(4) > 0 || (h-off+24)%24 < 12
		}
		ds[i] = d
	}
	return ds
}

// TestTimeSliceGap measures first-fit decreasing against the optimum found
// by exhaustive search on small random cases.
func TestTimeSliceGap(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 4))
	c := Capacity{Compute: 0.9, Memory: 72000}
	var cases, worse, sumFFD, sumOpt int
	maxGap := 0.0
	for k := 0; k < 300; k++ {
		ds := randomDemands(rng, 4+rng.IntN(5))
		bins := TimeSlice(ds, c)
		checkBins(t, ds, bins, c)
		opt := Optimum(len(ds), func(idx []int) bool { return FitsTogether(ds, idx, c) })
		if len(bins) < opt {
			t.Fatalf("case %d: FFD %d bins below the optimum %d: the search is wrong", k, len(bins), opt)
		}
		cases++
		sumFFD += len(bins)
		sumOpt += opt
		if len(bins) > opt {
			worse++
			maxGap = max(maxGap, float64(len(bins)-opt)/float64(opt))
		}
	}
	t.Logf("time-slicing (first fit or complement fill) over %d cases: %d GPUs against the optimum %d (%.1f %% more), worse in %d cases, worst gap %.0f %%",
		cases, sumFFD, sumOpt, 100*float64(sumFFD-sumOpt)/float64(sumOpt), worse, 100*maxGap)
	if float64(sumFFD-sumOpt)/float64(sumOpt) > 0.05 {
		t.Errorf("FFD needs %.1f %% more GPUs than the optimum overall, want ≤ 5 %%", 100*float64(sumFFD-sumOpt)/float64(sumOpt))
	}
}

func checkBins(t *testing.T, ds []Demand, bins []Bin, c Capacity) {
	t.Helper()
	seen := map[int]bool{}
	for _, b := range bins {
		for _, i := range b.Items {
			if seen[i] {
				t.Fatalf("demand %d placed twice", i)
			}
			seen[i] = true
		}
		if len(b.Items) > 1 && !FitsTogether(ds, b.Items, c) {
			t.Fatalf("bin %v over capacity", b.Items)
		}
	}
	if len(seen) != len(ds) {
		t.Fatalf("%d of %d demands placed", len(seen), len(ds))
	}
}

// TestMIGGap: MIG first-fit decreasing against the optimum, every layout
// placeable.
func TestMIGGap(t *testing.T) {
	g, _ := mig.Lookup("NVIDIA A100-SXM4-80GB")
	rng := rand.New(rand.NewPCG(17, 5))
	var sumFFD, sumOpt int
	for k := 0; k < 300; k++ {
		n := 3 + rng.IntN(6)
		ds := make([]Demand, n)
		for i := range ds {
			ds[i].Profile = g.Profiles[rng.IntN(len(g.Profiles)-1)].Name
		}
		bins, rest := MIG(ds, g)
		if len(rest) != 0 {
			t.Fatalf("%d demands left with a profile each", len(rest))
		}
		for _, b := range bins {
			if err := g.Validate(b.Layout); err != nil {
				t.Fatalf("case %d: %v", k, err)
			}
		}
		opt := Optimum(n, func(idx []int) bool {
			names := make([]string, len(idx))
			for j, i := range idx {
				names[j] = ds[i].Profile
			}
			_, ok := g.Place(names)
			return ok
		})
		if len(bins) < opt {
			t.Fatalf("case %d: FFD %d below the optimum %d", k, len(bins), opt)
		}
		sumFFD += len(bins)
		sumOpt += opt
	}
	gap := float64(sumFFD-sumOpt) / float64(sumOpt)
	t.Logf("MIG FFD over 300 cases: %d GPUs against the optimum %d (%.1f %% more)", sumFFD, sumOpt, 100*gap)
	if gap > 0.05 {
		t.Errorf("MIG FFD needs %.1f %% more GPUs than the optimum, want ≤ 5 %%", 100*gap)
	}
}

// dayNight is n services that peak by day (08:00-20:00) and n that peak by
// night, each at peak of a GPU by its own hours and 0.04 in the others,
// 10 GiB each: two of a kind fit under a 0.9 target (0.88), a day and a
// night one peak at 0.48.
func dayNight(n int, peak float64) []Demand {
	var ds []Demand
	for _, night := range []bool{false, true} {
		for range n {
			d := Demand{Compute: make([]float64, 24), Peak: make([]float64, 24), Memory: 10240}
			for h := range d.Compute {
				if byDay := h >= 8 && h < 20; byDay != night {
					d.Compute[h] = peak
				} else {
					d.Compute[h] = 0.04
				}
				d.Peak[h] = d.Compute[h]
			}
			ds = append(ds, d)
		}
	}
	return ds
}

// TestTimeSliceComplementaryPeaks: services whose peaks fall at different
// hours share GPUs day with night, not day with day, when both take as
// many GPUs; and the complement fill never costs a GPU first fit saves.
func TestTimeSliceComplementaryPeaks(t *testing.T) {
	c := Capacity{Compute: 0.9, Memory: 72000}
	ds := dayNight(4, 0.44)
	bins := TimeSlice(ds, c)
	checkBins(t, ds, bins, c)
	if len(bins) != 4 {
		t.Fatalf("%d GPUs, want 4", len(bins))
	}
	for k, b := range bins {
		if len(b.Items) != 2 || (b.Items[0] < 4) == (b.Items[1] < 4) {
			t.Errorf("GPU %d holds %v: want one day and one night service", k, b.Items)
		}
		if p := b.P95Load(); math.Abs(p-0.48) > 1e-9 {
			t.Errorf("GPU %d's worst hour %.3f, want 0.48", k, p)
		}
	}
	order, spans := decreasing(ds, c)
	if ff := timeSlice(ds, c, order, spans); len(ff) != 4 || sumPeaks(ff) < 3.5 {
		t.Errorf("first fit alone: %d GPUs, worst hours summing %.2f; want the day-with-day 4 × 0.88 this test is about", len(ff), sumPeaks(ff))
	}
	rng := rand.New(rand.NewPCG(3, 9))
	for k := 0; k < 200; k++ {
		ds := randomDemands(rng, 10+rng.IntN(30))
		order, spans := decreasing(ds, c)
		if got, ff := TimeSlice(ds, c), timeSlice(ds, c, order, spans); len(got) > len(ff) {
			t.Fatalf("case %d: %d GPUs, first fit %d", k, len(got), len(ff))
		}
	}
}

// TestTimeSliceIsFirstFit: the column and block tests that pass GPUs over
// are exact; the packing is the plain first fit's (every GPU's whole
// profile tried in order) on random fleets of short, long, absent and
// oversized demands.
func TestTimeSliceIsFirstFit(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	c := Capacity{Compute: 0.9, Memory: 80000}
	for trial := range 1000 {
		n, hours := 1+r.IntN(300), 1+r.IntN(48)
		ds := make([]Demand, n)
		for i := range ds {
			d := &ds[i]
			d.Compute, d.Present = make([]float64, hours), make([]bool, hours)
			a, b := r.IntN(hours), r.IntN(hours)
			for h := min(a, b); h <= max(a, b); h++ {
				if r.IntN(10) > 0 {
					d.Present[h], d.Compute[h] = true, 0.6*r.Float64()
				}
			}
			if r.IntN(5) == 0 {
				d.Present = nil
				for h := range d.Compute {
					d.Compute[h] = 0.3 * r.Float64()
				}
			}
			if r.IntN(20) == 0 {
				d.Compute[r.IntN(hours)] = 1.5
			}
			d.Memory = float64(r.IntN(40000))
		}
		order, spans := decreasing(ds, c)
		got := timeSlice(ds, c, order, spans)
		var want []Bin
		for _, i := range order {
			k := 0
			for k < len(want) && !want[k].fits(&ds[i], spans[i], c) {
				k++
			}
			if k == len(want) {
				want = append(want, newBin(hours))
			}
			want[k].add(i, &ds[i])
		}
		if len(got) != len(want) {
			t.Fatalf("trial %d: %d GPUs, first fit %d", trial, len(got), len(want))
		}
		for k := range got {
			if !slices.Equal(got[k].Items, want[k].Items) {
				t.Fatalf("trial %d: GPU %d holds %v, first fit %v", trial, k, got[k].Items, want[k].Items)
			}
		}
	}
}

// TestTimeSliceByOwner: each owner's demands share GPUs only with their
// own, an ownerless demand gets a GPU alone, every demand is placed once,
// and one owner's demands pack exactly as TimeSlice packs them.
func TestTimeSliceByOwner(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	c := Capacity{Compute: 0.9, Memory: 72000}
	ds := randomDemands(rng, 30)
	for i := range ds {
		switch {
		case i%10 == 9:
			ds[i].Owner = "" // unknown owner
		case i%2 == 0:
			ds[i].Owner = "ann"
		default:
			ds[i].Owner = "bob"
		}
	}
	bins := TimeSliceByOwner(ds, c)
	checkBins(t, ds, bins, c)
	var ann []Demand
	annBins := 0
	for k, b := range bins {
		checkOneOwnerAtATime(t, k, ds, b)
		for _, i := range b.Items {
			if ds[i].Owner == "ann" {
				annBins++
				break
			}
		}
	}
	for i := range ds {
		if ds[i].Owner == "ann" {
			ann = append(ann, ds[i])
		}
	}
	if want := len(TimeSlice(ann, c)); annBins != want {
		t.Errorf("ann's work on %d GPUs, want %d as packed on its own", annBins, want)
	}
	if mixed := len(TimeSlice(ds, c)); len(bins) <= mixed {
		t.Errorf("by owner %d GPUs, mixed %d: the owners' separation cost nothing on a case built to need it", len(bins), mixed)
	}
}

// checkOneOwnerAtATime fails when two owners' work (or an ownerless
// demand's and another's) is on GPU k in the same hour.
func checkOneOwnerAtATime(t *testing.T, k int, ds []Demand, b Bin) {
	t.Helper()
	for h := range ds[0].Compute {
		var at []int
		for _, i := range b.Items {
			if sp := spanOf(&ds[i]); h >= sp.first && h <= sp.last && (ds[i].Present == nil || ds[i].Present[h]) {
				at = append(at, i)
			}
		}
		owners := map[string]bool{}
		for _, i := range at {
			owners[ds[i].Owner] = true
		}
		if len(owners) > 1 || owners[""] && len(at) > 1 {
			t.Errorf("GPU %d, hour %d: work of owners %v at once", k, h, owners)
			return
		}
	}
}

// Owners may follow one another on a GPU: a day's job of each of seven
// owners, one after another through a week, needs one GPU, not seven; a
// job on a day the week's GPU is busy takes another GPU, which an
// ownerless job on another day may then follow on.
func TestTimeSliceByOwnerFollowOneAnother(t *testing.T) {
	const hours = 7 * 24
	day := func(owner string, d int) Demand {
		x := Demand{ID: owner, Owner: owner, Compute: make([]float64, hours), Present: make([]bool, hours), Memory: 20000}
		for h := d * 24; h < (d+1)*24; h++ {
			x.Compute[h], x.Present[h] = 0.5, true
		}
		return x
	}
	c := Capacity{Compute: 0.9, Memory: 72000}
	var week []Demand
	for d := range 7 {
		week = append(week, day(fmt.Sprintf("user%d", d), d))
	}
	if bins := TimeSliceByOwner(week, c); len(bins) != 1 {
		t.Errorf("seven owners on seven days: %d GPUs, want 1", len(bins))
	}
	same := append(week, day("other", 3), day("", 5))
	bins := TimeSliceByOwner(same, c)
	if len(bins) != 2 {
		t.Errorf("with two more jobs on days the week's GPU is busy: %d GPUs, want 2", len(bins))
	}
	for k, b := range bins {
		checkOneOwnerAtATime(t, k, same, b)
	}
}
