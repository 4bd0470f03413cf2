package simload

import (
	"context"
	"errors"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

func TestFanoutHandsEverySinkEveryCollectionInOrder(t *testing.T) {
	const n = 100
	got := make([][]time.Time, 3)
	var sinks []Sink
	for i := range got {
		sinks = append(sinks, func(ts time.Time, _ []*dto.MetricFamily) error {
			got[i] = append(got[i], ts)
			return nil
		})
	}
	f := NewFanout(context.Background(), sinks...)
	origin := time.Unix(0, 0)
	for k := 0; k < n; k++ {
		if err := f.Sink(origin.Add(time.Duration(k)*time.Second), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for i, ts := range got {
		if len(ts) != n {
			t.Fatalf("sink %d got %d collections, want %d", i, len(ts), n)
		}
		for k, x := range ts {
			if want := origin.Add(time.Duration(k) * time.Second); !x.Equal(want) {
				t.Fatalf("sink %d: collection %d at %s, want %s", i, k, x, want)
			}
		}
	}
}

// A failing sink stops the replay with its error, while the others keep
// draining: the producer never blocks on the one that stopped reading.
func TestFanoutStopsOnAFailingSink(t *testing.T) {
	boom := errors.New("disk full")
	ok := 0
	f := NewFanout(context.Background(),
		func(time.Time, []*dto.MetricFamily) error { ok++; return nil },
		func(ts time.Time, _ []*dto.MetricFamily) error {
			if ts.Unix() == 3 {
				return boom
			}
			return nil
		})
	var err error
	for k := 0; k < 10*fanoutQueue && err == nil; k++ {
		err = f.Sink(time.Unix(int64(k), 0), nil)
	}
	if !errors.Is(err, boom) {
		t.Fatalf("Sink returned %v, want the failing sink's error", err)
	}
	if err := f.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close returned %v, want the failing sink's error", err)
	}
	if ok == 0 {
		t.Fatal("the healthy sink received nothing")
	}
}

// A producer held up by a slow sink is let go when the context ends, and
// a replay that goes on after that is refused.
func TestFanoutStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := NewFanout(ctx, func(time.Time, []*dto.MetricFamily) error { <-ctx.Done(); return nil })
	done := make(chan error, 1)
	go func() {
		var err error
		for k := 0; err == nil; k++ {
			err = f.Sink(time.Unix(int64(k), 0), nil)
		}
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sink returned %v, want context.Canceled", err)
	}
	if err := f.Sink(time.Unix(0, 0), nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sink after the context ended returned %v, want context.Canceled", err)
	}
}
