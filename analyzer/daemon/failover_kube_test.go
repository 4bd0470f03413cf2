package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The ladder of the failover tests on the real control plane, in real
// seconds: both lessons go out at once, the reclaim follows.
const kubeFailoverPolicy = `
dry_run: false
min_warning: 2s
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: dev
    match: {namespaces: [%s]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s, channels: [webhook]}
          - {action: warn, after: 0s, channels: [webhook]}
          - {action: reclaim, after: %s}
`

// Short leases, so the test waits seconds: the same code as in production,
// where client-go's 15 s lease and the store's TTL apply.
const (
	kubeFailoverLease = 3 * time.Second
	kubeFailoverRenew = 2 * time.Second
	kubeFailoverRetry = 250 * time.Millisecond
)

// apiCalls counts the calls that change something in the API server, per
// method and path, over every replica's client; the Lease's own renewals are
// left out (they are the election, not an action).
type apiCalls struct {
	mu sync.Mutex
	n  map[string]int
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (c *apiCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/leases") {
			c.mu.Lock()
			c.n[r.Method+" "+r.URL.Path]++
			c.mu.Unlock()
		}
		return rt.RoundTrip(r)
	})
}

func (c *apiCalls) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

// kubeReplica is one analyzer on the real control plane: its own
// connections to the shared PostgreSQL store, its own client (counted), its
// own place in the election on a coordination.k8s.io Lease, and the
// analyzer's real facts source and eviction actuator.
type kubeReplica struct {
	id     string
	st     *store.Store
	log    *audit.Log
	kl     *kube.Lease
	d      *Daemon
	cancel context.CancelFunc
	done   chan struct{}
}

type kubeFailoverRig struct {
	ns, pod, node string
	created       time.Time // the pod's creation: its telemetry begins then
	pgURL, doc    string
	hook          *hookServer
	calls         *apiCalls
}

// replica starts one analyzer; act, when set, wraps its eviction actuator.
func (g *kubeFailoverRig) replica(t *testing.T, id string, act func(action.Actuator) action.Actuator) *kubeReplica {
	t.Helper()
	st, err := store.OpenURL(g.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(g.doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(testkube.Config(t))
	cfg.Wrap(g.calls.wrap)
	cs := testkube.Client(t, cfg)
	var evict action.Actuator = &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"}
	if act != nil {
		evict = act(evict)
	}
	esc := &Escalator{Policy: p, Log: lg, Metrics: NewMetrics(prometheus.NewRegistry()),
		Facts:     &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: cs.CoreV1()}}},
		Actuators: map[string]action.Actuator{schema.SchedulerKubernetes: evict, "webhook": &action.Webhook{URL: g.hook.srv.URL}}}
	src := SourceFunc(func(_ context.Context, at time.Time) ([]finding.Finding, error) {
		return []finding.Finding{{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Scheduler: schema.SchedulerKubernetes,
			Namespace: g.ns, Pod: g.pod, Job: g.ns + "/" + g.pod, Hostname: g.node,
			Start: g.created, End: at, WastedGPUHours: 2}}, nil
	})
	// A crash gives nothing up: the successor waits the lease out.
	kl, err := kube.NewLease(kube.LeaseOptions{Coordination: cs.CoordinationV1(), Namespace: g.ns, Identity: id,
		LeaseDuration: kubeFailoverLease, RenewDeadline: kubeFailoverRenew, RetryPeriod: kubeFailoverRetry})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &kubeReplica{id: id, st: st, log: lg, kl: kl, cancel: cancel, done: make(chan struct{}),
		d: &Daemon{Source: src, Escalator: esc, Leader: leader.Both{kl, &leader.StoreLease{Store: st, Identity: id, TTL: kubeFailoverLease}}}}
	go func() { defer close(r.done); kl.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// kill stops the replica as a crash does: the election stops renewing, the
// store's connections close, the Lease and the lease row stay as they were.
func (r *kubeReplica) kill() {
	r.cancel()
	<-r.done
	r.st.Close()
}

func newKubeFailoverRig(t *testing.T, reclaimAfter string) *kubeFailoverRig {
	admin := testkube.Admin(t)
	g := &kubeFailoverRig{pgURL: testpg.URL(t), hook: newHookServer(t), calls: &apiCalls{n: map[string]int{}}}
	g.ns = testkube.Namespace(t, admin, nil)
	p := testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: g.ns}})
	g.pod, g.node, g.created = p.Name, p.Spec.NodeName, p.CreationTimestamp.UTC()
	g.doc = fmt.Sprintf(kubeFailoverPolicy, g.ns, reclaimAfter)
	return g
}

// leaderOf waits until exactly one of rs leads the Kubernetes Lease.
func leaderOf(t *testing.T, rs ...*kubeReplica) *kubeReplica {
	t.Helper()
	var l *kubeReplica
	testtool.Eventually(t, 30*time.Second, "a leader on the Lease", func() (bool, error) {
		l = nil
		for _, r := range rs {
			if ok, _ := r.kl.Lead(context.Background(), time.Now()); ok {
				if l != nil {
					return false, errors.New("two leaders at once")
				}
				l = r
			}
		}
		return l != nil, nil
	})
	return l
}

func stepCounts(t *testing.T, lg *audit.Log, job string) map[string]int {
	t.Helper()
	evs, err := lg.Events(context.Background(), audit.Filter{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range evs {
		n[e.Step+":"+string(e.State)]++
	}
	return n
}

func (g *kubeFailoverRig) evictions() int {
	return g.calls.snapshot()["POST /api/v1/namespaces/"+g.ns+"/pods/"+g.pod+"/eviction"]
}

func (g *kubeFailoverRig) podGone(t *testing.T) bool {
	p, err := testkube.Admin(t).CoreV1().Pods(g.ns).Get(context.Background(), g.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true
	}
	return err == nil && p.DeletionTimestamp != nil
}

// Acceptance (issue 24), on the real control plane: two analyzers share
// PostgreSQL and elect on a real Lease; the leader dies after the warning
// and before the reclaim. The other takes over within the two leases, sends
// no second warning (deliveries counted on the webhook's server) and evicts
// exactly once (the API calls of both replicas counted on their clients).
func TestFailoverOnRealControlPlane(t *testing.T) {
	// The reclaim comes due 2 s after the warning (the policy's
	// min_warning): a dies before it, b takes over (3 to 6 s later) and
	// finds it due.
	g := newKubeFailoverRig(t, "2s")
	a := g.replica(t, "analyzer-a", nil)
	leaderOf(t, a)
	b := g.replica(t, "analyzer-b", nil)
	ctx := context.Background()
	// a leads both leases: it alone sends the lessons.
	testtool.Eventually(t, 30*time.Second, "the warning, from a", func() (bool, error) {
		if res, err := a.d.RunOnce(ctx); err != nil || res.Standby {
			return false, fmt.Errorf("a: %+v %v", res, err)
		}
		if res, err := b.d.RunOnce(ctx); err != nil || !res.Standby {
			return false, fmt.Errorf("b acted while a leads: %+v %v", res, err)
		}
		return g.hook.deliveries()["warn"] == 1, nil
	})
	if g.evictions() != 0 {
		t.Fatalf("evicted before the reclaim was due: %v", g.calls.snapshot())
	}
	a.kill()
	died := time.Now()
	var tookOver time.Duration
	testtool.Eventually(t, 60*time.Second, "the reclaim, by b", func() (bool, error) {
		res, err := b.d.RunOnce(ctx)
		if err != nil {
			return false, err
		}
		if !res.Standby && tookOver == 0 {
			tookOver = time.Since(died)
		}
		return stepCounts(t, b.log, g.ns+"/"+g.pod)["reclaim:done"] == 1, nil
	})
	// A few more cycles: nothing is sent or evicted again.
	for i := 0; i < 5; i++ {
		if _, err := b.d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(kubeFailoverRetry)
	}
	if max := 2*kubeFailoverLease + 2*time.Second; tookOver == 0 || tookOver > max {
		t.Errorf("b took over %s after a died, want within %s (the Lease, then the store's lease)", tookOver, max)
	}
	if got := g.hook.deliveries(); len(got) != 2 || got["notify"] != 1 || got["warn"] != 1 {
		t.Errorf("webhook deliveries %v, want exactly one notify and one warn", got)
	}
	if n := g.evictions(); n != 1 || !g.podGone(t) {
		t.Errorf("evictions %d (pod gone %v), want exactly one; API calls %v", n, g.podGone(t), g.calls.snapshot())
	}
	n := stepCounts(t, b.log, g.ns+"/"+g.pod)
	for _, k := range []string{"notify:intended", "notify:done", "warn:intended", "warn:done", "reclaim:intended", "reclaim:done"} {
		if n[k] != 1 {
			t.Errorf("audit %s: %d events, want 1 (all: %v)", k, n[k], n)
		}
	}
	t.Logf("b took over %s after a died (Lease %s, store lease %s); webhook %v; API calls %v",
		tookOver.Round(10*time.Millisecond), kubeFailoverLease, kubeFailoverLease, g.hook.deliveries(), g.calls.snapshot())
}

// hangingActuator lets the eviction through, then never returns: the
// process dies between the audit's intent and its result.
type hangingActuator struct {
	action.Actuator
	once    sync.Once
	entered chan struct{}
}

func (h *hangingActuator) Act(ctx context.Context, req *action.Request) (string, error) {
	if req.Step != action.StepReclaim {
		return h.Actuator.Act(ctx, req)
	}
	detail, err := h.Actuator.Act(ctx, req)
	h.once.Do(func() { close(h.entered) })
	<-ctx.Done()
	return detail, errors.Join(err, errors.New("killed"))
}

func (h *hangingActuator) Reconcile(ctx context.Context, req *action.Request) (action.Outcome, string, error) {
	return h.Actuator.(action.Reconciler).Reconcile(ctx, req)
}

// The leader dies between the eviction's intent and its result, the pod
// already evicted: the new leader's reconcile asks the API server, settles
// the step once, as done, and evicts nothing again.
func TestFailoverBetweenIntentAndResultOnRealControlPlane(t *testing.T) {
	t.Parallel()
	g := newKubeFailoverRig(t, "2s")
	hang := &hangingActuator{entered: make(chan struct{})}
	a := g.replica(t, "analyzer-a", func(k action.Actuator) action.Actuator { hang.Actuator = k; return hang })
	leaderOf(t, a)
	b := g.replica(t, "analyzer-b", nil)
	actx, stop := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		for actx.Err() == nil {
			if _, err := a.d.RunOnce(actx); err != nil && actx.Err() == nil {
				t.Errorf("a: %v", err)
				return
			}
			select {
			case <-hang.entered:
				return
			case <-time.After(kubeFailoverRetry):
			}
		}
	}()
	select {
	case <-hang.entered:
	case <-time.After(60 * time.Second):
		t.Fatal("a never reached the reclaim")
	}
	// a hangs inside its eviction until killed: the step is only intended.
	if pending, err := b.log.Pending(context.Background()); err != nil || len(pending) != 1 || pending[0].Step != "reclaim" {
		t.Fatalf("pending while a hangs: %+v %v", pending, err)
	}
	stop()
	a.kill()
	<-ran
	ctx := context.Background()
	testtool.Eventually(t, 60*time.Second, "b settles the reclaim", func() (bool, error) {
		if _, err := b.d.RunOnce(ctx); err != nil {
			return false, err
		}
		pending, err := b.log.Pending(ctx)
		return err == nil && len(pending) == 0, err
	})
	for i := 0; i < 5; i++ {
		if _, err := b.d.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(kubeFailoverRetry)
	}
	if n := g.evictions(); n != 1 {
		t.Errorf("evictions %d, want a's one only; API calls %v", n, g.calls.snapshot())
	}
	n := stepCounts(t, b.log, g.ns+"/"+g.pod)
	if n["reclaim:intended"] != 1 || n["reclaim:done"] != 1 || n["reclaim:failed"] != 0 {
		t.Errorf("reclaim audit %v, want one intent settled once as done", n)
	}
	if got := g.hook.deliveries(); got["notify"] != 1 || got["warn"] != 1 {
		t.Errorf("webhook deliveries %v, want one notify and one warn", got)
	}
}
