package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/store/storetest"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
)

// clock is one process's clock, set by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) read() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// fencedReplica is one analyzer process on the shared store, with its own
// clock, lease, actuators and findings.
type fencedReplica struct {
	r     *rig
	d     *Daemon
	clk   *clock
	mu    sync.Mutex
	idle  bool          // the job is idle in this replica's telemetry
	pause chan struct{} // when set, the next read of the findings blocks until it is closed
	in    chan struct{} // closed when a read blocks
}

func newFencedReplica(t *testing.T, url, id string, ttl time.Duration, job finding.Finding) *fencedReplica {
	t.Helper()
	st, err := store.OpenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &fencedReplica{r: newRig(t, fmt.Sprintf(leaderPolicy, "10m", "30m"), st), clk: &clock{}}
	src := SourceFunc(func(_ context.Context, at time.Time) ([]finding.Finding, error) {
		p.mu.Lock()
		pause, in, idle := p.pause, p.in, p.idle
		p.pause = nil
		p.mu.Unlock()
		if pause != nil {
			close(in)
			<-pause // stopped between its leadership check and its acts
		}
		if !idle {
			return nil, nil
		}
		f := job
		f.End = at
		return []finding.Finding{f}, nil
	})
	p.d = &Daemon{Source: src, Escalator: p.r.esc, Now: p.clk.read, Leader: &leader.StoreLease{Store: st, Identity: id, TTL: ttl}}
	return p
}

func (p *fencedReplica) setIdle(v bool) { p.mu.Lock(); p.idle = v; p.mu.Unlock() }

// pauseNext makes the next cycle stop after it has checked its leadership,
// before its findings are read; the returned channels say when it stopped
// and let it go on.
func (p *fencedReplica) pauseNext() (in, resume chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pause, p.in = make(chan struct{}), make(chan struct{})
	return p.in, p.pause
}

func (p *fencedReplica) run(t *testing.T) CycleResult {
	t.Helper()
	res, err := p.d.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("cycle at %s: %v", p.clk.read(), err)
	}
	return res
}

// The paused leader: a leads, checks its leadership at the start of
// a cycle and is stopped (SIGSTOP, a paused VM) before it acts. Where b
// takes the lease over meanwhile, notifies, warns and closes the episode
// (the job went busy), a wakes up with its stale findings and does nothing:
// its clock says its renew deadline passed, or, where its clock did not see
// the pause (a VM's), the store refuses its lease generation. Where nobody
// took over, a's resumed cycle acts on nothing either, and its next cycle,
// having renewed, escalates. A short pause inside the deadline is no
// pause. Each step once, in order; no episode written by a stale leader.
func TestPausedLeaderCannotAct(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// pause is how long a is stopped; seen whether a's clock counts it.
		pause    time.Duration
		seen     bool
		takeover bool
		// aResumed, aNext: the steps a delivers after waking, in its
		// resumed cycle and in the one after.
		aResumed, aNext []string
	}{
		{"SIGSTOP: a's clock ran through the pause, b took over", 10 * time.Minute, true, true, nil, nil},
		{"paused VM: a's clock missed the pause, b took over", 10 * time.Minute, false, true, nil, nil},
		{"past the renew deadline, nobody took over", 150 * time.Second, true, false, nil, []string{"notify 101", "warn 101"}},
		{"a short pause inside the renew deadline", 30 * time.Second, true, false, []string{"notify 101", "warn 101"}, nil},
	}
	backends := map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return filepath.Join(t.TempDir(), "state.db") },
		"postgres": func(t *testing.T) string { return testpg.URL(t) },
	}
	for _, be := range []string{"sqlite", "postgres"} {
		for _, tc := range cases {
			t.Run(be+": "+tc.name, func(t *testing.T) {
				t.Parallel()
				testPausedLeader(t, backends[be](t), tc.pause, tc.seen, tc.takeover, tc.aResumed, tc.aNext)
			})
		}
	}
}

func testPausedLeader(t *testing.T, url string, pause time.Duration, seen, takeover bool, aResumed, aNext []string) {
	ttl := 3 * time.Minute
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	job := idle("101", "bob", "dev", t0)
	a, b := newFencedReplica(t, url, "a", ttl, job), newFencedReplica(t, url, "b", ttl, job)
	a.clk.set(t0)
	b.clk.set(t0)
	if res := a.run(t); res.Standby {
		t.Fatal("a does not lead")
	}
	if res := b.run(t); !res.Standby {
		t.Fatal("b leads beside a")
	}
	// a checks its leadership, then stops before reading its findings.
	a.setIdle(true)
	in, resume := a.pauseNext()
	done := make(chan CycleResult, 1)
	a.clk.set(t0.Add(time.Minute))
	go func() {
		res, err := a.d.RunOnce(context.Background())
		if err != nil {
			t.Errorf("a's resumed cycle: %v", err)
		}
		done <- res
	}()
	<-in
	wake := t0.Add(time.Minute + pause)
	if takeover {
		b.setIdle(true)
		led := false
		for at := t0.Add(time.Minute); at.Before(wake); at = at.Add(time.Minute) {
			b.clk.set(at)
			if res := b.run(t); !res.Standby {
				led = true
			}
			if at.After(t0.Add(time.Minute + ttl + 2*time.Minute)) {
				b.setIdle(false) // the job went busy: b's next cycle closes the episode
			}
		}
		if !led {
			t.Fatal("b never took over")
		}
	}
	if seen {
		a.clk.set(wake)
	}
	close(resume)
	res := <-done
	if got := a.steps(); strings.Join(got, ",") != strings.Join(aResumed, ",") {
		t.Fatalf("a's resumed cycle delivered %v, want %v (result %+v)", got, aResumed, res)
	}
	if len(aResumed) == 0 && !res.Standby {
		t.Fatalf("a's resumed cycle should end as standby: %+v", res)
	}
	a.setIdle(true)
	a.clk.set(wake.Add(time.Minute))
	a.run(t)
	if got := a.steps(); strings.Join(got, ",") != strings.Join(append(aResumed, aNext...), ",") {
		t.Fatalf("a delivered %v after its next cycle, want %v", got, append(aResumed, aNext...))
	}
	want := "notify:intended notify:done warn:intended warn:done"
	if got := auditOf(t, b.r.log, "101"); got != want {
		t.Fatalf("audit %s, want %s", got, want)
	}
	if takeover {
		if got := b.steps(); strings.Join(got, ",") != "notify 101,warn 101" {
			t.Fatalf("b delivered %v", got)
		}
		var n int
		if err := b.r.st.DB().QueryRow(`SELECT COUNT(*) FROM escalations`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d episodes open after b closed it and a woke (%v)", n, err)
		}
	}
}

func (p *fencedReplica) steps() []string {
	var out []string
	for _, a := range []*fakeActuator{p.r.hook, p.r.slurm} {
		a.mu.Lock()
		out = append(out, a.calls...)
		a.mu.Unlock()
	}
	return out
}

func auditOf(t *testing.T, l *audit.Log, job string) string {
	t.Helper()
	evs, err := l.Events(context.Background(), audit.Filter{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Step+":"+string(e.State))
	}
	return strings.Join(got, " ")
}

// breakingHook is a webhook that delivers, and at its first warning makes
// the store refuse every update of the audit (PostgreSQL restarted
// mid-step): the warning went out, its outcome cannot be written.
type breakingHook struct {
	*fakeActuator
	t     *testing.T
	st    *store.Store
	fault *storetest.Fault
}

func (h *breakingHook) Act(ctx context.Context, req *action.Request) (string, error) {
	d, err := h.fakeActuator.Act(ctx, req)
	if req.Step == "warn" && h.fault == nil {
		h.fault = storetest.RefuseUpdates(h.t, h.st, "actions")
	}
	return d, err
}

// A Finish write that fails leaves the warning intended; the same leader,
// on its next cycle, writes the outcome it knows (done: the warning went
// out) instead of waiting for another replica to reconcile it, sends no
// second warning, and goes on with the ladder.
func TestFailedFinishSettledBySameLeader(t *testing.T) {
	t.Parallel()
	for _, be := range []string{"sqlite", "postgres"} {
		t.Run(be, func(t *testing.T) {
			t.Parallel()
			url := filepath.Join(t.TempDir(), "state.db")
			if be == "postgres" {
				url = testpg.URL(t)
			}
			t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
			job := idle("101", "bob", "dev", t0)
			p := newFencedReplica(t, url, "a", 3*time.Minute, job)
			hook := &breakingHook{fakeActuator: p.r.hook, t: t, st: p.r.st}
			p.r.esc.Actuators["webhook"] = hook
			p.setIdle(true)
			p.clk.set(t0)
			if _, err := p.d.RunOnce(context.Background()); err == nil {
				t.Fatal("the cycle whose Finish failed reported no error")
			}
			if pending, _ := p.r.log.Pending(context.Background()); len(pending) != 1 || pending[0].Step != "warn" {
				t.Fatalf("pending after the failed write: %+v", pending)
			}
			hook.fault.Lift()
			for m := 1; m <= 31; m++ {
				p.clk.set(t0.Add(time.Duration(m) * time.Minute))
				if res := p.run(t); res.Standby {
					t.Fatalf("standby at +%dm", m)
				}
			}
			if got := strings.Join(p.steps(), ","); got != "notify 101,warn 101,reclaim 101" {
				t.Fatalf("delivered %s, want one notify, one warning, one reclaim", got)
			}
			want := "notify:intended notify:done warn:intended warn:done reclaim:intended reclaim:done"
			if got := auditOf(t, p.r.log, "101"); got != want {
				t.Fatalf("audit %s, want %s", got, want)
			}
			r, _, _ := p.r.log.Get(context.Background(), audit.Key(job.Key(), t0, "warn"))
			if !r.Finished.Equal(t0) || r.Generation == 0 {
				t.Fatalf("the warning's record %+v: want it finished at the time it was sent, under a generation", r)
			}
		})
	}
}
