package leader

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// A fence is valid from the claim it was won at to its renew deadline on
// the process's clock, and at no other reading: a clock that jumps
// forwards past the deadline (a paused process) or backwards before the
// claim is refused, and the zero fence is never valid.
func TestFenceValid(t *testing.T) {
	held := Fence{Store: store.Fence{Lease: LeaseName, Holder: "a", Generation: 3}, Won: t0, Deadline: t0.Add(10 * time.Second)}
	mono := time.Now()
	live := Fence{Won: mono, Deadline: mono.Add(time.Minute)}
	for _, tc := range []struct {
		name string
		f    Fence
		now  time.Time
		want bool
	}{
		{"sole: always", SoleFence(), time.Time{}, true},
		{"sole: a clock far ahead", SoleFence(), t0.Add(1000 * time.Hour), true},
		{"zero fence: never led", Fence{}, t0, false},
		{"zero fence at the zero time", Fence{}, time.Time{}, false},
		{"at the claim", held, t0, true},
		{"inside the span", held, t0.Add(9 * time.Second), true},
		{"at the deadline", held, t0.Add(10 * time.Second), false},
		{"paused past the deadline", held, t0.Add(46 * time.Second), false},
		{"clock jumped a day forwards", held, t0.Add(24 * time.Hour), false},
		{"clock jumped backwards before the claim", held, t0.Add(-time.Second), false},
		{"clock jumped a year backwards", held, t0.AddDate(-1, 0, 0), false},
		{"a deadline without a claim time", Fence{Deadline: t0.Add(time.Second)}, t0, true},
		{"a claim time without a deadline", Fence{Won: t0}, t0, false},
		{"a deadline before the claim (tampered)", Fence{Won: t0, Deadline: t0.Add(-time.Second)}, t0, false},
		{"monotonic readings: inside", live, mono.Add(30 * time.Second), true},
		{"monotonic readings: past", live, mono.Add(time.Minute + time.Nanosecond), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.f.Valid(tc.now); got != tc.want {
				t.Fatalf("Valid(%s) of %+v = %v, want %v", tc.now, tc.f, got, tc.want)
			}
		})
	}
}

// Meet holds only where each member does.
func TestMeet(t *testing.T) {
	st := Fence{Store: store.Fence{Lease: LeaseName, Holder: "a", Generation: 2}, Won: t0, Deadline: t0.Add(10 * time.Second)}
	kube := Fence{Won: t0.Add(time.Second), Deadline: t0.Add(8 * time.Second)}
	for _, tc := range []struct {
		name  string
		fs    []Fence
		at    time.Time
		valid bool
		gen   int64
	}{
		{"no member", nil, t0, true, 0},
		{"sole members", []Fence{SoleFence(), SoleFence()}, t0, true, 0},
		{"store and Kubernetes: the earliest deadline", []Fence{kube, st}, t0.Add(9 * time.Second), false, 2},
		{"store and Kubernetes: inside both", []Fence{kube, st}, t0.Add(5 * time.Second), true, 2},
		{"store and Kubernetes: the latest claim", []Fence{st, kube}, t0.Add(500 * time.Millisecond), false, 2},
		{"one member lost its lease", []Fence{st, {}}, t0.Add(time.Second), false, 2},
		{"the first member lost its lease", []Fence{{}, st}, t0.Add(time.Second), false, 2},
		{"sole and held", []Fence{SoleFence(), st}, t0.Add(time.Second), true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Meet(tc.fs...)
			if m.Valid(tc.at) != tc.valid || m.Store.Generation != tc.gen {
				t.Fatalf("Meet = %+v: valid at %s %v, want %v, generation %d", m, tc.at, m.Valid(tc.at), tc.valid, tc.gen)
			}
		})
	}
}

type fixedFence Fence

func (f fixedFence) Fence() Fence { return Fence(f) }

// A guard refuses with ErrNotLeader; without a fencer it allows (a sole
// analyzer); Fenced recognises both refusals.
func TestGuard(t *testing.T) {
	var nilGuard *Guard
	if err := nilGuard.Check(); err != nil {
		t.Fatalf("nil guard: %v", err)
	}
	held := fixedFence{Won: t0, Deadline: t0.Add(time.Second)}
	now := t0
	g := &Guard{Fencer: held, Now: func() time.Time { return now }}
	if err := g.Check(); err != nil {
		t.Fatalf("inside the span: %v", err)
	}
	now = t0.Add(2 * time.Second)
	if err := g.Check(); !errors.Is(err, ErrNotLeader) || !Fenced(err) {
		t.Fatalf("past the deadline: %v", err)
	}
	if err := (&Guard{Fencer: fixedFence{}}).Check(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("never led: %v", err)
	}
	if !Fenced(fmt.Errorf("audit intend k: %w", store.ErrFenced)) || Fenced(errors.New("disk full")) {
		t.Fatal("Fenced misreads the store's refusal")
	}
}

// The store lease's fence follows its claims: won with the row's
// generation and a deadline of two thirds of the TTL on the claimer's
// clock, extended by each renewal, cleared when the lease is lost or
// released. A standby whose clock goes backwards and back does not take
// early; one whose clock jumps forwards does, and
// then the old holder's fence, valid on its own clock, is refused by the
// store.
func TestStoreLeaseFence(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *store.Store {
		s, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx := context.Background()
	ttl := 3 * time.Minute
	a := &StoreLease{Store: open(), Identity: "a", TTL: ttl, RenewDeadline: 5 * time.Minute} // clamped: not below TTL
	b := &StoreLease{Store: open(), Identity: "b", TTL: ttl}
	lead := func(l *StoreLease, at time.Duration, want bool) Fence {
		t.Helper()
		ok, err := l.Lead(ctx, t0.Add(at))
		if err != nil || ok != want {
			t.Fatalf("%s at +%s: %v %v, want %v", l.Identity, at, ok, err, want)
		}
		return l.Fence()
	}
	fa := lead(a, 0, true)
	row, _ := a.Store.ReadLease(ctx, LeaseName)
	if fa.Store != (store.Fence{Lease: LeaseName, Holder: "a", Generation: row.Generation}) || !fa.Deadline.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("a's fence %+v (row %+v)", fa, row)
	}
	if f := lead(b, 0, false); f.Valid(t0) {
		t.Fatalf("a standby's fence is valid: %+v", f)
	}
	if f := lead(a, time.Minute, true); !f.Deadline.Equal(t0.Add(3*time.Minute)) || f.Store != fa.Store {
		t.Fatalf("renewed fence %+v", f)
	}
	// b's clock goes backwards and comes back: it counts from the reading
	// it first saw the row at, never from the one that went back.
	lead(b, 2*time.Minute, false)
	lead(b, -time.Hour, false)
	lead(b, 4*time.Minute, false)
	// a pauses past its deadline: its own fence lapses on its clock.
	if a.Fence().Valid(t0.Add(4 * time.Minute)) {
		t.Fatal("a's fence valid past its renew deadline")
	}
	// b's clock jumps a day forwards: b takes the lease early. a, on its
	// own clock still inside its span, holds a fence the store refuses.
	lead(b, 24*time.Hour, true)
	fb := b.Fence()
	if fb.Store.Generation != fa.Store.Generation+1 {
		t.Fatalf("b's generation %d after a's %d", fb.Store.Generation, fa.Store.Generation)
	}
	stale := a.Fence()
	if !stale.Valid(t0.Add(2 * time.Minute)) {
		t.Fatal("a's fence should still look valid on its own clock")
	}
	if err := hold(a.Store, stale.Store); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("the store took a write of a's old generation: %v", err)
	}
	if err := hold(b.Store, fb.Store); err != nil {
		t.Fatalf("the store refused b's: %v", err)
	}
	// a's next claim sees the lease is b's: its fence is cleared.
	if f := lead(a, 2*time.Minute, false); f.Valid(t0.Add(2*time.Minute)) || f.Store.Lease != "" {
		t.Fatalf("a's fence after losing the lease: %+v", f)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if f := b.Fence(); f.Valid(t0.Add(24 * time.Hour)) {
		t.Fatalf("b's fence after release: %+v", f)
	}
	if f := lead(a, 3*time.Minute, true); f.Store.Generation != fb.Store.Generation+1 {
		t.Fatalf("a re-won at generation %d, want %d", f.Store.Generation, fb.Store.Generation+1)
	}
}

func hold(s *store.Store, f store.Fence) error {
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // test
	return store.HoldFence(ctx, tx, f)
}
