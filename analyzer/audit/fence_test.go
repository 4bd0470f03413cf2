package audit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/store/storetest"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
)

// analyzerLog is one analyzer process's view of the shared store: its own
// handle, its lease and its audit log fenced by that lease.
type analyzerLog struct {
	st    *store.Store
	lease *leader.StoreLease
	log   *Log
}

const fenceTTL = 3 * time.Minute

func newAnalyzerLog(t *testing.T, url, id string) *analyzerLog {
	t.Helper()
	st, err := store.OpenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	a := &analyzerLog{st: st, lease: &leader.StoreLease{Store: st, Identity: id, TTL: fenceTTL}, log: l}
	l.FenceWith(a.lease)
	return a
}

func (a *analyzerLog) lead(t *testing.T, at time.Time, want bool) {
	t.Helper()
	if ok, err := a.lease.Lead(context.Background(), at); err != nil || ok != want {
		t.Fatalf("%s leads at %s: %v %v, want %v", a.lease.Identity, at, ok, err, want)
	}
}

func rec(key string, t0 time.Time) Record {
	return Record{Key: key, FindingKey: "n1|7|cpu_only", Episode: t0, Step: "warn", Actuator: "webhook", Hostname: "n1", Job: "7", Payload: "{}"}
}

func countEvents(t *testing.T, l *Log) int {
	t.Helper()
	evs, err := l.Events(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// Every write of a fenced log is made under its lease generation: the
// leader's are written (its generation on the step), and a leader that
// was paused while another took over, or a process that never led, has
// each of its writes refused with store.ErrFenced and nothing changed.
func TestFencedWrites(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testFencedWrites(t, func(t *testing.T) string { return t.TempDir() + "/s.db" })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testFencedWrites(t, func(t *testing.T) string { return testpg.URL(t) })
	})
}

// testFencedWrites runs each case on a fresh database from fresh.
func testFencedWrites(t *testing.T, fresh func(t *testing.T) string) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	ops := []struct {
		name string
		do   func(l *Log) error
	}{
		{"intend a new step", func(l *Log) error { _, _, err := l.Intend(ctx, rec("new", t0), t0); return err }},
		{"intend the retry of a failed step", func(l *Log) error { _, _, err := l.Intend(ctx, rec("failed", t0), t0); return err }},
		{"finish an intended step", func(l *Log) error { return l.Finish(ctx, "open", Done, "sent", t0) }},
		{"observe an episode", func(l *Log) error { _, err := l.Observe(ctx, "n1|8|cpu_only", t0.Add(time.Hour)); return err }},
		{"end episodes", func(l *Log) error { _, err := l.EndEpisodes(ctx, t0.Add(time.Hour)); return err }},
	}
	writers := []struct {
		name string
		// who returns the log that writes, after the setup.
		who    func(a, b, never *analyzerLog) *Log
		fenced bool
	}{
		{"the stale leader (paused while another took over)", func(a, _, _ *analyzerLog) *Log { return a.log }, true},
		{"a process that never led", func(_, _, never *analyzerLog) *Log { return never.log }, true},
		{"the new leader", func(_, b, _ *analyzerLog) *Log { return b.log }, false},
	}
	for _, w := range writers {
		for _, op := range ops {
			t.Run(w.name+": "+op.name, func(t *testing.T) {
				t.Parallel() // each on a fresh database
				u := fresh(t)
				a, b, never := newAnalyzerLog(t, u, "a"), newAnalyzerLog(t, u, "b"), newAnalyzerLog(t, u, "never")
				a.lead(t, t0, true)
				gen := a.lease.Fence().Store.Generation
				r, ok, err := a.log.Intend(ctx, rec("open", t0), t0)
				if err != nil || !ok || r.Generation != gen || gen == 0 {
					t.Fatalf("the leader's intent: %+v %v %v (generation %d)", r, ok, err, gen)
				}
				if _, _, err := a.log.Intend(ctx, rec("failed", t0), t0); err != nil {
					t.Fatal(err)
				}
				if err := a.log.Finish(ctx, "failed", Failed, "refused", t0); err != nil {
					t.Fatal(err)
				}
				if _, err := a.log.Observe(ctx, "n1|7|cpu_only", t0); err != nil {
					t.Fatal(err)
				}
				// a is paused; b sees the lease unrenewed for its TTL and takes it.
				b.lead(t, t0, false)
				b.lead(t, t0.Add(fenceTTL), true)
				never.lead(t, t0.Add(fenceTTL), false)
				events := countEvents(t, b.log)
				err = op.do(w.who(a, b, never))
				if !w.fenced {
					if err != nil {
						t.Fatalf("the leader's write refused: %v", err)
					}
					return
				}
				if !errors.Is(err, store.ErrFenced) {
					t.Fatalf("a stale write: %v, want ErrFenced", err)
				}
				if n := countEvents(t, b.log); n != events {
					t.Fatalf("a refused write added %d audit events", n-events)
				}
				if got, _, _ := b.log.Get(ctx, "open"); got.State != Intended {
					t.Fatalf("the open step is %s after a refused write", got.State)
				}
				if _, found, _ := b.log.Get(ctx, "new"); found {
					t.Fatal("a refused intent was written")
				}
				if ep, err := b.log.Observe(ctx, "n1|7|cpu_only", t0.Add(fenceTTL)); err != nil || !ep.Equal(t0) {
					t.Fatalf("the episode after a refused write began %s (%v), want %s", ep, err, t0)
				}
				if n, err := w.who(a, b, never).Rewrite(ctx); n != 0 || err != nil {
					t.Fatalf("a refused result was kept to be written again: %d %v", n, err)
				}
			})
		}
	}
}

// A Finish that fails (the database refusing writes mid-step) leaves the
// step intended, with its outcome kept in the leader's memory: the
// leader's Interrupted does not offer it to a reconcile (nor a step it has
// in flight), and Rewrite writes the outcome as it happened once the
// store takes writes again. Another process (a restart: another
// generation) sees both steps as interrupted.
func TestRewriteFailedFinish(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		testRewriteFailedFinish(t, t.TempDir()+"/s.db")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		testRewriteFailedFinish(t, testpg.URL(t))
	})
}

func testRewriteFailedFinish(t *testing.T, url string) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a := newAnalyzerLog(t, url, "a")
	a.lead(t, t0, true)
	for _, k := range []string{"sent", "in-flight"} {
		if _, ok, err := a.log.Intend(ctx, rec(k, t0), t0); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	fault := storetest.RefuseUpdates(t, a.st, "actions")
	err := a.log.Finish(ctx, "sent", Done, "delivered", t0.Add(time.Second))
	if err == nil || errors.Is(err, store.ErrFenced) {
		t.Fatalf("Finish with the store refusing: %v", err)
	}
	if got, err := a.log.Interrupted(ctx); err != nil || len(got) != 0 {
		t.Fatalf("the leader's own steps offered to reconcile: %+v %v", got, err)
	}
	if n, err := a.log.Rewrite(ctx); n != 0 || err == nil {
		t.Fatalf("rewrite with the store still refusing: %d %v", n, err)
	}
	other := newAnalyzerLog(t, url, "restarted")
	if got, err := other.log.Interrupted(ctx); err != nil || len(got) != 2 {
		t.Fatalf("another process sees %+v %v, want both steps", got, err)
	}
	fault.Lift()
	a.lead(t, t0.Add(time.Minute), true)
	if n, err := a.log.Rewrite(ctx); n != 1 || err != nil {
		t.Fatalf("rewrite: %d %v", n, err)
	}
	r, _, _ := a.log.Get(ctx, "sent")
	if r.State != Done || r.Detail != "delivered" || !r.Finished.Equal(t0.Add(time.Second)) {
		t.Fatalf("rewritten step %+v", r)
	}
	if n, err := a.log.Rewrite(ctx); n != 0 || err != nil {
		t.Fatalf("a second rewrite: %d %v", n, err)
	}
	evs, _ := a.log.Events(ctx, Filter{})
	var got []string
	for _, e := range evs {
		got = append(got, e.Key+":"+string(e.State))
	}
	if want := "sent:intended in-flight:intended sent:done"; strings.Join(got, " ") != want {
		t.Fatalf("audit %s, want %s", strings.Join(got, " "), want)
	}
}
