package store

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Two processes' stores on one file: one holder at a time, renewals keep
// it whatever the clocks say, release hands it over, and a takeover
// succeeds only on the row the taker saw.
func TestLeaseOneHolder(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	a, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	testLeaseOneHolder(t, a, b)
}

func testLeaseOneHolder(t *testing.T, a, b *Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ttl := time.Minute
	step := func(s *Store, who string, at time.Duration, want bool) {
		t.Helper()
		_, got, err := s.AcquireLease(ctx, "analyzer", who, ttl, t0.Add(at))
		if err != nil || got != want {
			t.Fatalf("%s at +%s: got %v (%v), want %v", who, at, got, err, want)
		}
	}
	step(a, "A", 0, true)
	step(b, "B", 10*time.Second, false)
	step(a, "A", 50*time.Second, true) // renewed until +110s
	step(b, "B", 100*time.Second, false)
	// Past its stamp, by B's wall clock or one far ahead: still A's. The
	// store never judges expiry; a standby does, on its own clock.
	step(b, "B", 111*time.Second, false)
	step(b, "B", 24*time.Hour, false)
	_, stamp, err := b.LeaseHolder(ctx, "analyzer")
	if err != nil {
		t.Fatal(err)
	}
	step(a, "A", 60*time.Second, true) // renewed with a clock running behind: the stamp still grows
	if _, took, err := b.TakeLease(ctx, "analyzer", "A", stamp, "B", ttl, t0.Add(200*time.Second)); took || err != nil {
		t.Fatalf("took a lease renewed since it was seen: %v %v", took, err)
	}
	_, stamp, _ = b.LeaseHolder(ctx, "analyzer")
	if _, took, err := b.TakeLease(ctx, "analyzer", "A", stamp, "B", ttl, t0.Add(200*time.Second)); !took || err != nil {
		t.Fatalf("takeover of the row seen: %v %v", took, err)
	}
	step(a, "A", 120*time.Second, false)
	if err := b.ReleaseLease(ctx, "analyzer", "B"); err != nil {
		t.Fatal(err)
	}
	step(a, "A", 121*time.Second, true)

	// Racing for a free lease: exactly one wins.
	var wg sync.WaitGroup
	wins := make(chan string, 20)
	for i := 0; i < 20; i++ {
		s, who := a, "A"
		if i%2 == 1 {
			s, who = b, "B"
		}
		who += string(rune('a' + i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := s.AcquireLease(ctx, "race", who, ttl, t0); err == nil && ok {
				wins <- who
			}
		}()
	}
	wg.Wait()
	close(wins)
	if n := len(wins); n != 1 {
		t.Fatalf("%d holders of one lease", n)
	}
}
