package store

import (
	"context"
	"testing"
	"time"
)

func TestUsageSpan(t *testing.T) {
	t.Parallel()
	backends(t, testUsageSpan)
}

func testUsageSpan(t *testing.T, open func(t *testing.T) *Store) {
	s := open(t)
	ctx := context.Background()
	if _, _, ok, err := s.UsageSpan(ctx, ""); err != nil || ok {
		t.Fatalf("empty store: ok=%v err=%v, want no span", ok, err)
	}
	t0 := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	if err := s.AddUsage(ctx, []Usage{
		{Start: t0, End: t0.Add(time.Hour), Hostname: "n1", Job: "1", Team: "ml", GPUs: 1, AllocatedGPUHours: 1},
		{Start: t0.Add(48 * time.Hour), End: t0.Add(49 * time.Hour), Hostname: "n1", Job: "2", Team: "ml", GPUs: 1, AllocatedGPUHours: 1},
		{Start: t0.Add(-24 * time.Hour), End: t0.Add(-23 * time.Hour), Hostname: "n2", Job: "3", Team: "vision", GPUs: 1, AllocatedGPUHours: 1},
	}); err != nil {
		t.Fatal(err)
	}
	first, last, ok, err := s.UsageSpan(ctx, "ml")
	if err != nil || !ok || !first.Equal(t0) || !last.Equal(t0.Add(49*time.Hour)) {
		t.Errorf("ml: %v %v %v %v, want %v to %v", first, last, ok, err, t0, t0.Add(49*time.Hour))
	}
	if first, _, ok, _ := s.UsageSpan(ctx, ""); !ok || !first.Equal(t0.Add(-24*time.Hour)) {
		t.Errorf("all teams start %v, want %v", first, t0.Add(-24*time.Hour))
	}
	if _, _, ok, _ := s.UsageSpan(ctx, "nobody"); ok {
		t.Error("a team without usage has a span")
	}
}
