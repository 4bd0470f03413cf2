package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
)

// hookServer is the webhook receiver: it counts deliveries by step.
type hookServer struct {
	mu  sync.Mutex
	got map[string]int
	srv *httptest.Server
}

func newHookServer(t *testing.T) *hookServer {
	h := &hookServer{got: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p action.WebhookPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got[p.Step]++
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookServer) deliveries() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.got {
		out[k] = v
	}
	return out
}

// pgReplica is one analyzer process on the shared PostgreSQL store: its
// own connections, lease identity and actuators; the webhook is real.
type pgReplica struct {
	st *store.Store
	r  *rig
	d  *Daemon
}

func newPGReplica(t *testing.T, url, id, doc string, hook string, ttl time.Duration, clock func() time.Time, slurm action.Actuator) *pgReplica {
	t.Helper()
	st, err := store.OpenURL(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := newRig(t, doc, st)
	r.esc.Actuators = map[string]action.Actuator{"slurm": slurm, "webhook": &action.Webhook{URL: hook}}
	src := SourceFunc(func(_ context.Context, at time.Time) ([]finding.Finding, error) {
		return []finding.Finding{idle("101", "bob", "dev", at)}, nil
	})
	lead := &leader.StoreLease{Store: st, Identity: id, TTL: ttl}
	return &pgReplica{st: st, r: r, d: &Daemon{Source: src, Escalator: r.esc, Leader: lead, Now: clock}}
}

// Acceptance (issue 24): two analyzers share PostgreSQL; the leader dies
// after the warning and before the reclaim. The other takes over within
// the lease time, sends no second warning (deliveries counted on the
// webhook's server) and reclaims exactly once.
func TestFailoverOnSharedPostgres(t *testing.T) {
	t.Parallel()
	url := testpg.URL(t)
	hook := newHookServer(t)
	doc := fmt.Sprintf(leaderPolicy, "10m", "30m")
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var now time.Time
	clock := func() time.Time { return now }
	ttl := 3 * time.Minute
	stopped := map[string]bool{}
	sa := &fakeActuator{name: "slurm", stopped: stopped}
	sb := &fakeActuator{name: "slurm", stopped: stopped}
	a := newPGReplica(t, url, "a", doc, hook.srv.URL, ttl, clock, sa)
	b := newPGReplica(t, url, "b", doc, hook.srv.URL, ttl, clock, sb)
	deadAt, tookOver := 12*time.Minute, time.Duration(0)
	ctx := context.Background()
	for m := time.Duration(0); m <= 45*time.Minute; m += time.Minute {
		now = t0.Add(m)
		if m < deadAt {
			if res, err := a.d.RunOnce(ctx); err != nil || res.Standby {
				t.Fatalf("a at +%s: %+v %v", m, res, err)
			}
		} else if m == deadAt {
			a.st.Close() // the process is gone: its connections with it, the lease unreleased
		}
		res, err := b.d.RunOnce(ctx)
		if err != nil {
			t.Fatalf("b at +%s: %v", m, err)
		}
		if m < deadAt && !res.Standby {
			t.Fatalf("b acted at +%s while a leads", m)
		}
		if !res.Standby && tookOver == 0 {
			tookOver = m
		}
		if m == deadAt-time.Minute {
			if got := hook.deliveries(); got["notify"] != 1 || got["warn"] != 1 {
				t.Fatalf("before the failover the webhook got %v, want one notify and one warn", got)
			}
		}
	}
	if tookOver == 0 || tookOver-(deadAt-time.Minute) > ttl {
		t.Fatalf("b took over at +%s; a last renewed at +%s, lease %s", tookOver, deadAt-time.Minute, ttl)
	}
	if got := hook.deliveries(); len(got) != 2 || got["notify"] != 1 || got["warn"] != 1 {
		t.Errorf("webhook deliveries %v, want exactly one notify and one warn", got)
	}
	if sa.count("reclaim") != 0 || sb.count("reclaim") != 1 {
		t.Errorf("reclaims: a %v, b %v; want one, by b", sa.calls, sb.calls)
	}
	evs, err := b.r.log.Events(ctx, audit.Filter{Job: "101"})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Step+":"+string(e.State)]++
	}
	for _, k := range []string{"notify:intended", "notify:done", "warn:intended", "warn:done", "reclaim:intended", "reclaim:done"} {
		if n[k] != 1 {
			t.Errorf("audit %s: %d events, want 1 (all: %v)", k, n[k], n)
		}
	}
	t.Logf("b took over %s after a's last renewal (lease %s); webhook %v", tookOver-(deadAt-time.Minute), ttl, hook.deliveries())
}

// dyingSlurm cancels the job, then never returns: the process dies between
// the audit's intent and its result.
type dyingSlurm struct {
	mu      sync.Mutex
	stopped map[string]bool
	calls   int
	entered chan struct{}
}

func (d *dyingSlurm) Name() string { return "slurm" }

func (d *dyingSlurm) Act(ctx context.Context, req *action.Request) (string, error) {
	if req.Step != action.StepReclaim {
		return "ok", nil
	}
	d.mu.Lock()
	d.calls++
	d.stopped[req.Finding.Job] = true
	d.mu.Unlock()
	close(d.entered)
	<-ctx.Done()
	return "", errors.New("killed")
}

func (d *dyingSlurm) Reconcile(context.Context, *action.Request) (action.Outcome, string, error) {
	return action.Unknowable, "", nil
}

// The leader dies between the reclaim's intent and its result (the job was
// cancelled): the new leader's reconcile settles the step once, as done,
// and cancels nothing again.
func TestFailoverBetweenIntentAndResultOnSharedPostgres(t *testing.T) {
	t.Parallel()
	url := testpg.URL(t)
	hook := newHookServer(t)
	doc := fmt.Sprintf(leaderPolicy, "10m", "30m")
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var now time.Time
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }
	ttl := 3 * time.Minute
	stopped := map[string]bool{}
	sa := &dyingSlurm{stopped: stopped, entered: make(chan struct{})}
	sb := &fakeActuator{name: "slurm", stopped: stopped}
	a := newPGReplica(t, url, "a", doc, hook.srv.URL, ttl, clock, sa)
	b := newPGReplica(t, url, "b", doc, hook.srv.URL, ttl, clock, sb)
	ctx := context.Background()
	actx, kill := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { kill(); <-done }) // before the stores close
	go func() {
		defer close(done)
		for m := time.Duration(0); ; m += time.Minute {
			set(t0.Add(m))
			if _, err := a.d.RunOnce(actx); err != nil && actx.Err() == nil {
				t.Errorf("a at +%s: %v", m, err)
				return
			}
			if actx.Err() != nil {
				return
			}
			select {
			case <-sa.entered:
				return // a hangs inside the reclaim until killed
			default:
			}
			if _, err := b.d.RunOnce(ctx); err != nil {
				t.Errorf("b at +%s: %v", m, err)
				return
			}
		}
	}()
	select {
	case <-sa.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("a never reached the reclaim")
	}
	// a is stuck in its reclaim (as good as dead): the step is intended.
	died := clock()
	pending, err := b.r.log.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Step != "reclaim" {
		t.Fatalf("pending after a died: %+v %v", pending, err)
	}
	tookOver := time.Duration(0)
	for m := time.Minute; m <= 10*time.Minute; m += time.Minute {
		set(died.Add(m))
		res, err := b.d.RunOnce(ctx)
		if err != nil {
			t.Fatalf("b at +%s after a died: %v", m, err)
		}
		if !res.Standby {
			tookOver = m
			break
		}
	}
	if tookOver == 0 || tookOver > ttl+time.Minute {
		t.Fatalf("b took over %s after a died (lease %s)", tookOver, ttl)
	}
	for m := tookOver + time.Minute; m <= tookOver+5*time.Minute; m += time.Minute {
		set(died.Add(m))
		if _, err := b.d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if pending, err := b.r.log.Pending(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("still pending after b reconciled: %+v %v", pending, err)
	}
	if sa.calls != 1 || sb.count("reclaim") != 0 {
		t.Errorf("cancels: a %d, b %v; want a's one only", sa.calls, sb.calls)
	}
	evs, err := b.r.log.Events(ctx, audit.Filter{Job: "101"})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Step+":"+string(e.State)]++
	}
	if n["reclaim:intended"] != 1 || n["reclaim:done"] != 1 || n["reclaim:failed"] != 0 {
		t.Errorf("reclaim audit %v, want one intent settled once as done", n)
	}
	if got := hook.deliveries(); got["notify"] != 1 || got["warn"] != 1 {
		t.Errorf("webhook deliveries %v, want one notify and one warn", got)
	}
}
