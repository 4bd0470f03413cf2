package sim

import (
	"context"
	"testing"
	"time"
)

// BenchmarkCollect8GPU is one collection cycle of one simulated 8-GPU node
// with jobs, processes and allocations (the exporter's per-interval cost).
func BenchmarkCollect8GPU(b *testing.B) {
	clk := &fakeClock{t: testOrigin}
	src, err := New(DefaultScenario(), Options{Seed: 1, Clock: clk, Node: "a100-01"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clk.t = clk.t.Add(time.Second)
		if _, err := src.Collect(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWeek32GPU steps a fake clock through a simulated week of the
// default 32-GPU fleet at 30 s resolution (20,160 CollectAll calls): what
// the demo and the analyzer's corpus do. One op is the whole week.
func BenchmarkWeek32GPU(b *testing.B) {
	sc := DefaultScenario()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clk := &fakeClock{t: testOrigin}
		src, err := New(sc, Options{Seed: 1, Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 7*24*120; i++ {
			clk.t = testOrigin.Add(time.Duration(i) * 30 * time.Second)
			if _, err := src.CollectAll(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}
