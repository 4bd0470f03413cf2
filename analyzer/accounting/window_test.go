package accounting

import (
	"maps"
	"slices"
	"testing"
)

// A team's hours are summed in the book's key order: floats summed in
// map order give a different last digit from run to run (the plan and
// the reports then differ for the same book).
func TestTeamsSumsInAStableOrder(t *testing.T) {
	b := &Book{Allocations: map[string]*Allocation{}}
	for i, v := range []float64{1e16, 1, -1e16, 1, 0.1, 3, 1e-3, 7e15} {
		k := Key("h", string(rune('a'+i)))
		b.Allocations[k] = &Allocation{Hostname: "h", Job: k, Team: "t", Totals: Totals{Allocated: v}}
	}
	want := 0.0
	for _, k := range slices.Sorted(maps.Keys(b.Allocations)) {
		want += b.Allocations[k].Allocated
	}
	for range 50 {
		if got := b.Teams()["t"].Allocated; got != want {
			t.Fatalf("Teams() summed %v, want %v (the sum in key order)", got, want)
		}
	}
}
