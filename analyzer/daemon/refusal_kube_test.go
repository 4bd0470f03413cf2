package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/web"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

const refusalPolicy = `
dry_run: false
min_warning: 0s
channels:
  webhook: {url: "http://hook.invalid/x"}
retry: {initial_backoff: 5m, max_backoff: 20m, max_attempts: 3}
tiers:
  - name: dev
    match: {namespaces: [%s]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 0s}]
`

// Acceptance (issue 24): eviction under a PodDisruptionBudget that the
// controller-manager keeps at zero disruptions allowed. The API server
// refuses (429); the refusal is audited as failed and retried on the
// policy's backoff (5m, then 10m), not every cycle; after the third refusal
// the step is given up for the episode, once; the pod is never touched; and
// the web page's audit log shows the refusals and the give-up.
func TestRefusedEvictionGivenUpOnRealControlPlane(t *testing.T) {
	t.Parallel()
	admin := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, admin, nil)
	pod := testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "serve-0", Namespace: ns, Labels: map[string]string{"app": "serve"}}})
	one := intstr.FromInt32(1)
	if _, err := admin.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "serve"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "serve"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 60*time.Second, "the budget's status from the controller-manager", func() (bool, error) {
		p, err := admin.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "serve", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1 && p.Status.DisruptionsAllowed == 0, nil
	})

	calls := &apiCalls{n: map[string]int{}}
	cfg := rest.CopyConfig(testkube.Config(t))
	cfg.Wrap(calls.wrap)
	cs := testkube.Client(t, cfg)
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lg, err := audit.Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(refusalPolicy, ns)))
	if err != nil {
		t.Fatal(err)
	}
	esc := &Escalator{Policy: p, Log: lg, Metrics: NewMetrics(prometheus.NewRegistry()),
		Facts: &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: cs.CoreV1()}}},
		Actuators: map[string]action.Actuator{schema.SchedulerKubernetes: &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"},
			"webhook": &fakeActuator{name: "webhook", stopped: map[string]bool{}}}}
	start := time.Now().UTC().Truncate(time.Minute)
	job := ns + "/" + pod.Name
	f := finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Scheduler: schema.SchedulerKubernetes,
		Namespace: ns, Pod: pod.Name, Job: job, Hostname: pod.Spec.NodeName, Start: pod.CreationTimestamp.UTC(), WastedGPUHours: 1}
	// Two hours of five-minute cycles: 24 chances to evict.
	for m := 0; m <= 120; m += 5 {
		f.End = start.Add(time.Duration(m) * time.Minute)
		if _, err := esc.Cycle(ctx, f.End, []finding.Finding{f}); err != nil {
			t.Fatalf("cycle at +%dm: %v", m, err)
		}
	}

	evictions := calls.snapshot()["POST /api/v1/namespaces/"+ns+"/pods/"+pod.Name+"/eviction"]
	if evictions != 3 {
		t.Errorf("%d eviction requests over 24 cycles, want 3 (at 0, +5m, +15m; then given up)", evictions)
	}
	if _, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the budget's pod after the refusals: %v", err)
	}
	for k, n := range calls.snapshot() {
		if strings.HasPrefix(k, "DELETE ") {
			t.Errorf("%d× %s: nothing may be deleted (no delete_after_refusals in the policy)", n, k)
		}
	}
	// The episode began at the first cycle that saw the finding.
	rec, ok, err := lg.Get(ctx, audit.Key(f.Key(), start, "reclaim"))
	if err != nil || !ok || rec.State != audit.Failed || rec.Attempts != 3 || !strings.Contains(rec.Detail, "disruption budget refused") {
		t.Errorf("the reclaim's record: %+v (found %v, %v); want failed after 3 attempts, the budget's refusal", rec, ok, err)
	}
	gave, ok, err := lg.Get(ctx, audit.Key(f.Key(), start, "gave_up"))
	if err != nil || !ok || gave.State != audit.Skipped || !strings.Contains(gave.Detail, "gave up reclaim after 3 failed attempts") {
		t.Errorf("the give-up record: %+v (found %v, %v)", gave, ok, err)
	}
	if n := stepCounts(t, lg, job)["gave_up:skipped"]; n != 1 {
		t.Errorf("%d give-up records, want 1", n)
	}

	// The web page's audit log, as an operator opens it.
	srv := httptest.NewServer(web.Handler(web.Options{Audit: web.AuditLog{Log: lg}}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	for _, want := range []string{"gave_up", "gave up reclaim after 3 failed attempts", "disruption budget refused", job} {
		if !strings.Contains(page, want) {
			t.Errorf("the web page's audit log lacks %q", want)
		}
	}
}
