package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

const leaderPolicy = `
dry_run: false
min_warning: %s
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: dev
    match: {partitions: [dev]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s, channels: [webhook]}
          - {action: warn, after: 0s, channels: [webhook]}
          - {action: reclaim, after: %s}
`

// replica is one analyzer process: its own store handle on the shared file,
// its own actuators (counted), the same telemetry.
type replica struct {
	r *rig
	d *Daemon
}

func newReplica(t *testing.T, path, doc string, lead leader.Leadership, now func() time.Time) *replica {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newRig(t, doc, st)
	src := SourceFunc(func(_ context.Context, at time.Time) ([]finding.Finding, error) {
		return []finding.Finding{idle("101", "bob", "dev", at)}, nil
	})
	return &replica{r: r, d: &Daemon{Source: src, Escalator: r.esc, Leader: lead, Now: now}}
}

func (p *replica) steps() []string {
	var out []string
	for _, a := range []*fakeActuator{p.r.hook, p.r.slurm} {
		a.mu.Lock()
		out = append(out, a.calls...)
		a.mu.Unlock()
	}
	return out
}

func countSteps(rs ...*replica) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		for _, s := range r.steps() {
			n[s]++
		}
	}
	return n
}

// Two analyzers on one store: the one that takes the lease acts, the other
// stands by (no reconcile, no audit row, no message); when the leader dies,
// the other takes over within the lease time and finishes the ladder,
// without repeating a notification or a step.
func TestTwoAnalyzersOneStore(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	doc := fmt.Sprintf(leaderPolicy, "10m", "30m")
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var now time.Time
	clock := func() time.Time { return now }
	ttl := 3 * time.Minute
	mk := func(id string) *replica {
		st, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newReplica(t, path, doc, &leader.StoreLease{Store: st, Identity: id, TTL: ttl}, clock)
	}
	a, b := mk("a"), mk("b")
	deadAt, tookOver := 12*time.Minute, time.Duration(0)
	for m := time.Duration(0); m <= 45*time.Minute; m += time.Minute {
		now = t0.Add(m)
		if m < deadAt {
			res, err := a.d.RunOnce(context.Background())
			if err != nil || res.Standby {
				t.Fatalf("a at +%s: %+v %v", m, res, err)
			}
		}
		res, err := b.d.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if m < deadAt && !res.Standby {
			t.Fatalf("b acted at +%s while a leads", m)
		}
		if !res.Standby && tookOver == 0 {
			tookOver = m
		}
	}
	if tookOver == 0 || tookOver-(deadAt-time.Minute) > ttl {
		t.Fatalf("b took over at +%s; a last renewed at +%s, lease %s", tookOver, deadAt-time.Minute, ttl)
	}
	got := countSteps(a, b)
	want := map[string]int{"notify 101": 1, "warn 101": 1, "reclaim 101": 1}
	if len(got) != len(want) || got["notify 101"] != 1 || got["warn 101"] != 1 || got["reclaim 101"] != 1 {
		t.Fatalf("steps across both analyzers = %v, want %v", got, want)
	}
	if n := len(a.steps()); n != 2 {
		t.Errorf("a did %v, want the notify and the warning", a.steps())
	}
	if s := b.steps(); len(s) != 1 || s[0] != "reclaim 101" {
		t.Errorf("b did %v, want only the reclaim", s)
	}
}

// Two replicas with client-go leader election on a Lease (fake clientset)
// and one shared store: exactly one leads at any time; when the leader dies
// without releasing, the other takes over within the lease duration; no
// step runs twice.
func TestTwoReplicasLeaderElection(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time leader election (seconds)")
	}
	client := fake.NewClientset()
	path := filepath.Join(t.TempDir(), "state.db")
	doc := fmt.Sprintf(leaderPolicy, "1s", "3s")
	const leaseDuration = 1500 * time.Millisecond
	type member struct {
		rep    *replica
		lease  *kube.Lease
		cancel context.CancelFunc
		done   chan struct{}
	}
	mk := func(id string) *member {
		kl, err := kube.NewLease(kube.LeaseOptions{Coordination: client.CoordinationV1(), Namespace: "gpuwatch", Identity: id,
			LeaseDuration: leaseDuration, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
			// A killed process releases nothing.
			ReleaseOnCancel: false})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := &member{rep: newReplica(t, path, doc, kl, time.Now), lease: kl, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(m.done); kl.Run(ctx) }()
		return m
	}
	ms := []*member{mk("replica-a"), mk("replica-b")}
	defer func() {
		for _, m := range ms {
			m.cancel()
			<-m.done
		}
	}()
	var mu sync.Mutex
	killed := -1
	var killedAt, tookOverAt time.Time
	// Round after round for 9 s, or until the ladder has ended (the
	// reclaim, 3 s after the warning) and a lease duration and a second more
	// have passed without a second leader or a step again.
	start := time.Now()
	var reclaimedAt time.Time
	for time.Since(start) < 9*time.Second && (reclaimedAt.IsZero() || time.Since(reclaimedAt) < leaseDuration+time.Second) {
		leaders := 0
		for i, m := range ms {
			mu.Lock()
			dead := i == killed
			mu.Unlock()
			if dead {
				continue
			}
			res, err := m.rep.d.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !res.Standby {
				leaders++
				if killed >= 0 && tookOverAt.IsZero() {
					tookOverAt = time.Now()
				}
			}
		}
		if leaders > 1 {
			t.Fatal("two replicas acted in one round")
		}
		// Kill the leader (no release, as a crash) once the ladder began.
		if killed < 0 && countSteps(ms[0].rep, ms[1].rep)["warn 101"] == 1 {
			for i, m := range ms {
				if ok, _ := m.lease.Lead(context.Background(), time.Now()); ok {
					m.cancel() // the process is gone: it renews nothing
					mu.Lock()
					killed, killedAt = i, time.Now()
					mu.Unlock()
					break
				}
			}
		}
		if reclaimedAt.IsZero() && countSteps(ms[0].rep, ms[1].rep)["reclaim 101"] > 0 {
			reclaimedAt = time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	if killed < 0 {
		t.Fatal("no replica ever led")
	}
	if tookOverAt.IsZero() || tookOverAt.Sub(killedAt) > leaseDuration+time.Second {
		t.Fatalf("takeover %v after the kill; lease duration %s", tookOverAt.Sub(killedAt), leaseDuration)
	}
	got := countSteps(ms[0].rep, ms[1].rep)
	if len(got) != 3 || got["notify 101"] != 1 || got["warn 101"] != 1 || got["reclaim 101"] != 1 {
		t.Fatalf("steps across both replicas = %v, want one notify, warn and reclaim", got)
	}
}

// A lease is taken over only after the taker saw it unrenewed for the lease
// duration on its own clock: not at once when the holder shares this host
// name (containers), nor when the holder's stamp is in the past by the
// taker's wall clock (a clock running ahead); a holder that keeps renewing
// keeps it however its clock runs, and a crashed holder's lease passes on.
func TestLeaseTakeoverOnTheTakersClock(t *testing.T) {
	t.Parallel()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ttl := time.Minute
	host, _ := os.Hostname()
	for _, tc := range []struct {
		name string
		// holderClock is the live holder's wall clock against the taker's;
		// renews tells whether it keeps renewing.
		holderClock time.Duration
		renews      bool
		want        time.Duration // when the taker leads; 0: never in the 5 minutes
	}{
		{"live, same host name and pid", 0, true, 0},
		{"live, clock 1 h behind", -time.Hour, true, 0},
		{"live, clock 1 h ahead", time.Hour, true, 0},
		{"crashed, clock 1 h behind", -time.Hour, false, ttl},
		{"crashed", 0, false, ttl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), "0123456789abcdef")
			if _, ok, err := st.AcquireLease(ctx, leader.LeaseName, holder, ttl, t0.Add(tc.holderClock)); !ok || err != nil {
				t.Fatal(ok, err)
			}
			taker := &leader.StoreLease{Store: st, Identity: leader.Identity(), TTL: ttl}
			var led time.Duration
			for at := time.Duration(0); at <= 5*time.Minute; at += 10 * time.Second {
				if tc.renews {
					if _, ok, err := st.AcquireLease(ctx, leader.LeaseName, holder, ttl, t0.Add(tc.holderClock+at)); !ok || err != nil {
						t.Fatalf("holder lost its lease at +%s: %v %v", at, ok, err)
					}
				}
				ok, err := taker.Lead(ctx, t0.Add(at))
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					led = at
					break
				}
			}
			if led != tc.want {
				t.Errorf("taker led at +%s, want +%s (0: never)", led, tc.want)
			}
			_ = st.ReleaseLease(ctx, leader.LeaseName, taker.Identity)
			_ = st.ReleaseLease(ctx, leader.LeaseName, holder)
		})
	}
}
