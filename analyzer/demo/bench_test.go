package demo

import (
	"context"
	"testing"
	"time"
)

// BenchmarkSimulateSmallDay fast-forwards the small fleet (8 GPUs) through
// a simulated day with every analyzer cycle, escalation and output; the
// default demo is 4x the GPUs and 7x the span (`gpuwatch demo --exit
// --verbose` prints its own time and peak memory).
func BenchmarkSimulateSmallDay(b *testing.B) {
	sc, err := smallScenarioB()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		d, err := New(Options{Scenario: sc, Seed: 1, Length: 24 * time.Hour, Origin: origin, Out: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.Simulate(context.Background()); err != nil {
			b.Fatal(err)
		}
		d.Close()
	}
}
