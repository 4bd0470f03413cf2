package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// fenceRig is two processes' handles on one store: a and b hold leases, raw
// tampers with the rows as an operator (or an attacker) with SQL would.
type fenceRig struct {
	t     *testing.T
	a, b  *Store
	raw   *Store
	lease string
	t0    time.Time
	ttl   time.Duration
}

func (r *fenceRig) acquire(s *Store, holder string, at time.Duration) Lease {
	r.t.Helper()
	l, ok, err := s.AcquireLease(context.Background(), r.lease, holder, r.ttl, r.t0.Add(at))
	if err != nil || !ok {
		r.t.Fatalf("%s could not acquire %s: %v %v", holder, r.lease, ok, err)
	}
	return l
}

func (r *fenceRig) take(s *Store, holder string, at time.Duration) Lease {
	r.t.Helper()
	cur, err := s.ReadLease(context.Background(), r.lease)
	if err != nil {
		r.t.Fatal(err)
	}
	l, ok, err := s.TakeLease(context.Background(), r.lease, cur.Holder, cur.Stamp, holder, r.ttl, r.t0.Add(at))
	if err != nil || !ok {
		r.t.Fatalf("%s could not take %s: %v %v", holder, r.lease, ok, err)
	}
	return l
}

func (r *fenceRig) exec(q string, args ...any) {
	r.t.Helper()
	if _, err := r.raw.DB().ExecContext(context.Background(), q, args...); err != nil {
		r.t.Fatalf("%s: %v", q, err)
	}
}

func (r *fenceRig) fence(holder string, gen int64) Fence {
	return Fence{Lease: r.lease, Holder: holder, Generation: gen}
}

// holds runs HoldFence in a transaction of s, as an audit write does.
func holds(s *Store, f Fence) error {
	ctx := context.Background()
	tx, err := s.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // test
	if err := HoldFence(ctx, tx, f); err != nil {
		return err
	}
	return tx.Commit()
}

// The hostile and edge cases of fencing: a write carries the lease holder
// and generation it was decided under, and the store refuses it whenever
// the lease is not exactly that now: generations out of order, a lease
// taken, released, re-won or tampered with by hand, names that try SQL.
// Each case is refused with ErrFenced, or is safe (the holder's current
// generation, which it learns at its next renewal).
func TestFenceRefusesOtherGenerations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// setup brings the lease to the case's state and returns the fence
		// a write is made under.
		setup func(r *fenceRig) Fence
		ok    bool
	}{
		{"the holder's own generation", func(r *fenceRig) Fence {
			return r.fence("A", r.acquire(r.a, "A", 0).Generation)
		}, true},
		{"renewed: the generation stays", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			if l2 := r.acquire(r.a, "A", 20*time.Second); l2.Generation != l.Generation {
				r.t.Fatalf("a renewal changed the generation %d -> %d", l.Generation, l2.Generation)
			}
			return r.fence("A", l.Generation)
		}, true},
		{"an older generation of the same holder", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			if err := r.a.ReleaseLease(context.Background(), r.lease, "A"); err != nil {
				r.t.Fatal(err)
			}
			if l2 := r.acquire(r.a, "A", time.Second); l2.Generation <= l.Generation {
				r.t.Fatalf("re-won after release at generation %d, was %d", l2.Generation, l.Generation)
			}
			return r.fence("A", l.Generation)
		}, false},
		{"a generation from the future", func(r *fenceRig) Fence {
			return r.fence("A", r.acquire(r.a, "A", 0).Generation+1)
		}, false},
		{"a negative generation", func(r *fenceRig) Fence {
			r.acquire(r.a, "A", 0)
			return r.fence("A", -1)
		}, false},
		{"taken over: the old holder", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			if l2 := r.take(r.b, "B", 5*time.Minute); l2.Generation != l.Generation+1 {
				r.t.Fatalf("take: generation %d, want %d", l2.Generation, l.Generation+1)
			}
			return r.fence("A", l.Generation)
		}, false},
		{"taken over: the new holder", func(r *fenceRig) Fence {
			r.acquire(r.a, "A", 0)
			return r.fence("B", r.take(r.b, "B", 5*time.Minute).Generation)
		}, true},
		{"taken over: the new generation under the old name", func(r *fenceRig) Fence {
			r.acquire(r.a, "A", 0)
			return r.fence("A", r.take(r.b, "B", 5*time.Minute).Generation)
		}, false},
		{"taken and taken back: the first term", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.take(r.b, "B", 5*time.Minute)
			r.take(r.a, "A", 10*time.Minute)
			return r.fence("A", l.Generation)
		}, false},
		{"released", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			if err := r.a.ReleaseLease(context.Background(), r.lease, "A"); err != nil {
				r.t.Fatal(err)
			}
			return r.fence("A", l.Generation)
		}, false},
		{"released: a fence without a holder", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			if err := r.a.ReleaseLease(context.Background(), r.lease, "A"); err != nil {
				r.t.Fatal(err)
			}
			return r.fence("", l.Generation)
		}, false},
		{"no lease row at all", func(r *fenceRig) Fence { return r.fence("A", 0) }, false},
		{"no lease name", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			return Fence{Holder: "A", Generation: l.Generation}
		}, false},
		{"another lease's name", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			return Fence{Lease: r.lease + "-other", Holder: "A", Generation: l.Generation}
		}, false},
		{"tampered: row deleted", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`DELETE FROM leases WHERE name = ?`, r.lease)
			return r.fence("A", l.Generation)
		}, false},
		{"tampered: row deleted, then claimed by another", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`DELETE FROM leases WHERE name = ?`, r.lease)
			r.acquire(r.b, "B", time.Second)
			return r.fence("A", l.Generation)
		}, false},
		{"tampered: generation set back to an old holder's", func(r *fenceRig) Fence {
			old := r.acquire(r.a, "A", 0)
			r.take(r.b, "B", 5*time.Minute)
			r.exec(`UPDATE leases SET generation = ? WHERE name = ?`, old.Generation, r.lease)
			return r.fence("A", old.Generation) // the holder is still B
		}, false},
		{"tampered: generation bumped under the holder", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`UPDATE leases SET generation = generation + 7 WHERE name = ?`, r.lease)
			return r.fence("A", l.Generation)
		}, false},
		{"tampered: generation bumped, learnt at the next renewal", func(r *fenceRig) Fence {
			r.acquire(r.a, "A", 0)
			r.exec(`UPDATE leases SET generation = generation + 7 WHERE name = ?`, r.lease)
			return r.fence("A", r.acquire(r.a, "A", 20*time.Second).Generation)
		}, true},
		{"tampered: holder renamed", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`UPDATE leases SET holder = 'X' WHERE name = ?`, r.lease)
			return r.fence("A", l.Generation)
		}, false},
		{"tampered: holder emptied by hand", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`UPDATE leases SET holder = '' WHERE name = ?`, r.lease)
			return r.fence("A", l.Generation)
		}, false},
		{"tampered: stamp set back (the fence does not read it)", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			r.exec(`UPDATE leases SET expires_ms = 0 WHERE name = ?`, r.lease)
			if l2 := r.acquire(r.a, "A", time.Second); l2.Generation != l.Generation {
				r.t.Fatalf("renewal after a stamp set back: generation %d, want %d", l2.Generation, l.Generation)
			}
			return r.fence("A", l.Generation)
		}, true},
		{"a holder name that tries SQL", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			return r.fence("A' OR '1'='1", l.Generation)
		}, false},
		{"a lease name that tries SQL", func(r *fenceRig) Fence {
			l := r.acquire(r.a, "A", 0)
			return Fence{Lease: "x' OR name <> '", Holder: "A", Generation: l.Generation}
		}, false},
		{"a renew racing a take: the loser's fence", func(r *fenceRig) Fence {
			return raceRenewTake(r)
		}, false},
	}
	backends(t, func(t *testing.T, open func(t *testing.T) *Store) {
		a, b, raw := open(t), open(t), open(t)
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := &fenceRig{t: t, a: a, b: b, raw: raw, lease: fmt.Sprintf("fence-%d", i), ttl: time.Minute,
					t0: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}
				f := tc.setup(r)
				err := holds(a, f)
				switch {
				case tc.ok && err != nil:
					t.Fatalf("fence %+v refused: %v", f, err)
				case !tc.ok && !errors.Is(err, ErrFenced):
					t.Fatalf("fence %+v: %v, want ErrFenced", f, err)
				}
			})
		}
	})
}

// raceRenewTake has A renew while B takes the lease at the stamp it saw,
// many times over: exactly one of them wins each round, and the loser's
// fence is the one returned.
func raceRenewTake(r *fenceRig) Fence {
	ctx := context.Background()
	var loser Fence
	for round := 0; round < 10; round++ {
		l := r.acquire(r.a, "A", 0)
		cur, err := r.b.ReadLease(ctx, r.lease)
		if err != nil {
			r.t.Fatal(err)
		}
		var wg sync.WaitGroup
		var renewed, took bool
		var rl, tl Lease
		var rerr, terr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			rl, renewed, rerr = r.a.AcquireLease(ctx, r.lease, "A", r.ttl, r.t0.Add(time.Duration(round+1)*time.Second))
		}()
		go func() {
			defer wg.Done()
			tl, took, terr = r.b.TakeLease(ctx, r.lease, cur.Holder, cur.Stamp, "B", r.ttl, r.t0.Add(time.Hour))
		}()
		wg.Wait()
		if rerr != nil || terr != nil {
			r.t.Fatalf("round %d: renew %v, take %v", round, rerr, terr)
		}
		if took {
			if err := holds(r.a, r.fence("B", tl.Generation)); err != nil {
				r.t.Fatalf("round %d: the taker's fence refused: %v", round, err)
			}
			if renewed && rl.Holder == "A" {
				r.t.Fatalf("round %d: both the renew and the take won", round)
			}
			loser = r.fence("A", l.Generation)
		} else {
			if !renewed || rl.Generation != l.Generation {
				r.t.Fatalf("round %d: neither the renew nor the take won (%+v)", round, rl)
			}
			loser = r.fence("B", l.Generation+1)
		}
		if err := holds(r.a, loser); !errors.Is(err, ErrFenced) {
			r.t.Fatalf("round %d: the loser's fence %+v: %v", round, loser, err)
		}
		r.exec(`UPDATE leases SET holder = '' WHERE name = ?`, r.lease)
	}
	return loser
}

// Each change of holder is a new generation, a release included; a lease
// row deleted by hand starts again above every generation the audit holds,
// so no write of a past generation matches it again.
func TestLeaseGenerationNeverRepeats(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(t *testing.T) *Store) {
		s := open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		seen := map[int64]bool{}
		claim := func(holder string) int64 {
			t.Helper()
			l, ok, err := s.AcquireLease(ctx, "gen", holder, time.Minute, t0)
			if err != nil || !ok {
				t.Fatalf("%s: %v %v", holder, ok, err)
			}
			if seen[l.Generation] {
				t.Fatalf("generation %d handed out twice", l.Generation)
			}
			seen[l.Generation] = true
			return l.Generation
		}
		g := claim("A")
		if _, err := s.DB().ExecContext(ctx, `INSERT INTO actions (idem_key, finding_key, episode_ms, step, actuator, scheduler,
			hostname, job, user, team, pattern, tier, dry_run, state, attempts, detail, intended_ms, finished_ms, payload, generation)
			VALUES ('k', 'f', 0, 'warn', 'webhook', 'slurm', 'h', 'j', 'u', 't', 'cpu_only', 'dev', 0, 'done', 1, '', 0, 0, '{}', ?)`, g); err != nil {
			t.Fatal(err)
		}
		_ = s.ReleaseLease(ctx, "gen", "A")
		claim("B")
		_ = s.ReleaseLease(ctx, "gen", "B")
		claim("A")
		if _, err := s.DB().ExecContext(ctx, `DELETE FROM leases WHERE name = 'gen'`); err != nil {
			t.Fatal(err)
		}
		// Generations that wrote nothing may come again, to another holder
		// (a fence is holder and generation); none that wrote may.
		seen = map[int64]bool{}
		if g2 := claim("A"); g2 <= g {
			t.Fatalf("after the row was deleted: generation %d, not above the audit's %d", g2, g)
		}
	})
}
