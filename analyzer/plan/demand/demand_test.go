package demand

import (
	"math"
	"sort"
	"testing"
)

// TestMixtureQuantile: the window's quantiles from hourly mean, p95 and
// peak match the exact quantiles of the samples on profiles
// the planner meets: a daily cycle with noise, a steady load, bursts.
func TestMixtureQuantile(t *testing.T) {
	noise := func(i int) float64 { // deterministic, in [-1, 1)
		x := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
		x ^= x >> 29
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 32
		return float64(x>>11)/float64(1<<52) - 1
	}
	cases := map[string]func(i int) float64{
		"daily cycle": func(i int) float64 {
			return 0.05 + 0.75*(0.5-0.5*math.Cos(2*math.Pi*float64(i)/1440)) + 0.025*noise(i)
		},
		"steady": func(i int) float64 { return 0.4 + 0.24*noise(i) },
		"bursts": func(i int) float64 {
			if i%60 < 12 {
				return 0.07 + 0.04*noise(i)
			}
			return 0
		},
	}
	for name, f := range cases {
		var all []float64
		var hs []hourDist
		for h := 0; h < 168; h++ {
			var sum float64
			var hour []float64
			for m := 0; m < 60; m++ {
				x := f(h*60 + m)
				all = append(all, x)
				hour = append(hour, x)
				sum += x
			}
			sort.Float64s(hour)
			mean := sum / 60
			hs = append(hs, hourDist{mean: mean, sd: max(0, rank(hour, 0.95)-mean) / p95Z, peak: hour[59], n: 60})
		}
		sort.Float64s(all)
		for _, q := range []float64{0.5, 0.95} {
			exact := rank(all, q)
			got := mixtureQuantile(hs, q)
			// Within 0.02 of a GPU, or 10 % of the value.
			if math.Abs(got-exact) > max(0.02, 0.1*exact) {
				t.Errorf("%s: q%.2f %.4f, exact %.4f", name, q, got, exact)
			}
			t.Logf("%s: q%.2f %.4f, exact %.4f", name, q, got, exact)
		}
	}
}

// TestEveryFigureFetched: fetchAll's order names every figure once, so a
// figure added to the list is read.
func TestEveryFigureFetched(t *testing.T) {
	seen := map[figure]int{}
	for _, f := range dearestFirst {
		seen[f]++
	}
	for f := figure(0); f < figures; f++ {
		if seen[f] != 1 {
			t.Errorf("figure %d appears %d times in dearestFirst, want once", f, seen[f])
		}
	}
	if len(dearestFirst) != figures {
		t.Errorf("dearestFirst has %d figures, want %d", len(dearestFirst), figures)
	}
}
