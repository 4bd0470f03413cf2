package reclaim

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/schema"
)

const kubePolicy = `
dry_run: false
min_warning: 5m
kubernetes: {reclaim: %s}
channels:
  webhook: {url: "http://127.0.0.1:1/unused"}
tiers:
  - name: notebooks
    match: {namespaces: [nb-*]}
    reclaim: true
    rules:
      - pattern: idle_session
        steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 10m}]
`

type nopWarn struct{}

func (nopWarn) Name() string { return "webhook" }
func (nopWarn) Act(context.Context, *action.Request) (string, error) {
	return "warned", nil
}

func bp(b bool) *bool { return &b }

// onFindingsNode puts pods where podFinding's telemetry is, since long
// before its evidence, each with its UID: the targets are proven.
func onFindingsNode(objs []runtime.Object) []runtime.Object {
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.Spec.NodeName, p.UID = "gpu-node-3", types.UID("uid-"+p.Namespace+"-"+p.Name)
			p.CreationTimestamp = metav1.NewTime(time.Now().Add(-24 * time.Hour))
		}
	}
	return objs
}

func kubeObjects() []runtime.Object {
	running := corev1.PodStatus{Phase: corev1.PodRunning}
	return onFindingsNode([]runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nb-ann"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nb-ben"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jupyter-ann", Namespace: "nb-ann"}, Status: running},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "jupyter-ben", Namespace: "nb-ben"}, Status: running},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lab-7d9-x2", Namespace: "nb-ann", OwnerReferences: []metav1.OwnerReference{
			{Kind: "ReplicaSet", Name: "lab-7d9", Controller: bp(true)}}}, Status: running},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "lab-7d9", Namespace: "nb-ann", OwnerReferences: []metav1.OwnerReference{
			{Kind: "Deployment", Name: "lab", Controller: bp(true)}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "nb-ann"}, Spec: appsv1.DeploymentSpec{Replicas: func() *int32 { n := int32(1); return &n }()}},
	})
}

func podFinding(ns, pod string, now time.Time) finding.Finding {
	return finding.Finding{Pattern: schema.IdleSession, Severity: schema.SeverityWarning, Job: ns + "/" + pod, User: "ann", Team: "research",
		Kind: "interactive", Hostname: "gpu-node-3", Scheduler: "kubernetes", Namespace: ns, Pod: pod,
		Start: now.Add(-5 * time.Hour), End: now, WastedGPUHours: 5}
}

func kubeEscalator(t *testing.T, mode string, c *fake.Clientset) (*daemon.Escalator, *audit.Log) {
	t.Helper()
	pol, err := policy.Parse([]byte(strings.Replace(kubePolicy, "%s", mode, 1)))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return &daemon.Escalator{Policy: pol, Log: lg, Actuators: map[string]action.Actuator{
		"webhook":    nopWarn{},
		"kubernetes": &kube.Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: pol.Kubernetes.Reclaim, DeleteAfterRefusals: pol.Kubernetes.DeleteAfterRefusals},
	}, Facts: &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: c.CoreV1()}}}}, lg
}

// Evictions go to the idle pods only; a PodDisruptionBudget refusal (429)
// is recorded as failed and retried after the policy's backoff (5m, then
// 10m), not every cycle, until it is allowed.
func TestKubernetesEvictionWithPDBRefusals(t *testing.T) {
	t.Parallel()
	c := fake.NewClientset(kubeObjects()...)
	refusals := 2
	c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		if refusals > 0 {
			refusals--
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		}
		return false, nil, nil // the tracker evicts
	})
	e, lg := kubeEscalator(t, "evict", c)
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, m := range []int{0, 10, 11, 12, 13, 15, 16, 20, 24, 25} { // refused at 10 and 15, evicted at 25
		now := t0.Add(time.Duration(m) * time.Minute)
		if _, err := e.Cycle(context.Background(), now, []finding.Finding{podFinding("nb-ann", "jupyter-ann", now)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := kubetest.Evictions(c); strings.Join(got, ",") != "nb-ann/jupyter-ann,nb-ann/jupyter-ann,nb-ann/jupyter-ann" {
		t.Fatalf("evictions = %v, want three tries of nb-ann/jupyter-ann only", got)
	}
	if _, err := c.CoreV1().Pods("nb-ben").Get(context.Background(), "jupyter-ben", metav1.GetOptions{}); err != nil {
		t.Fatalf("the other pod was touched: %v", err)
	}
	evs, _ := lg.Events(context.Background(), audit.Filter{Job: "nb-ann/jupyter-ann"})
	var got []string
	for _, ev := range evs {
		if ev.Step == "reclaim" {
			got = append(got, string(ev.State))
			if ev.State == audit.Failed && !strings.Contains(ev.Detail, "disruption budget") {
				t.Errorf("refusal detail = %q", ev.Detail)
			}
		}
	}
	if want := "intended failed intended failed intended done"; strings.Join(got, " ") != want {
		t.Fatalf("reclaim audit = %v, want %s", got, want)
	}
}

func TestKubernetesScaleOwnerWhenConfigured(t *testing.T) {
	t.Parallel()
	c := fake.NewClientset(kubeObjects()...)
	kubetest.ScaleSubresource(c)
	e, _ := kubeEscalator(t, "scale_owner", c)
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, m := range []int{0, 10} {
		now := t0.Add(time.Duration(m) * time.Minute)
		if _, err := e.Cycle(context.Background(), now, []finding.Finding{podFinding("nb-ann", "lab-7d9-x2", now)}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := c.AppsV1().Deployments("nb-ann").Get(context.Background(), "lab", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 0 {
		t.Fatalf("deployment lab: replicas %d, want 0", *d.Spec.Replicas)
	}
	if got := kubetest.Evictions(c); len(got) != 0 {
		t.Fatalf("evicted %v instead of scaling the owner", got)
	}
}

// The owners' facts decide for pods: pod labels, annotations and namespace
// labels (from the API server, one list each per cycle) choose the tier;
// the teams file's podLabel rule names the team; gpuwatch.io/exempt on a
// pod is honoured, the policy trusting these pod keys. The findings carry
// none of these: only the pod's name.
func TestKubernetesFactsChooseTierAndTeam(t *testing.T) {
	t.Parallel()
	running := corev1.PodStatus{Phase: corev1.PodRunning}
	pod := func(ns, name string, labels, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: ann}, Status: running}
	}
	c := fake.NewClientset(onFindingsNode([]runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "serving", Labels: map[string]string{"env": "prod"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "lab", Labels: map[string]string{"env": "dev"}}},
		pod("serving", "triton-0", map[string]string{"team": "search"}, nil),
		pod("lab", "nb-ann", map[string]string{"app": "jupyter", "team": "research"}, nil),
		pod("lab", "nb-ben", map[string]string{"app": "jupyter", "team": "research"}, map[string]string{"gpuwatch.io/exempt": "true"}),
		pod("lab", "batch-1", map[string]string{"team": "vision"}, map[string]string{"priority": "low"}),
	})...)
	pol, err := policy.Parse([]byte(`
dry_run: false
min_warning: 5m
channels:
  webhook: {url: "http://127.0.0.1:1/unused"}
trust_workload_keys: {labels: [app], annotations: [priority, gpuwatch.io/exempt]}
tiers:
  - name: prod
    match: {namespace_labels: {env: prod}}
    rules:
      - pattern: idle_session
        steps: [{action: warn}, {action: reclaim, after: 10m}]
  - name: notebooks
    match: {labels: {app: jupyter}, teams: [research]}
    reclaim: true
    rules:
      - pattern: idle_session
        steps: [{action: warn}, {action: reclaim, after: 10m}]
  - name: low
    match: {annotations: {priority: low}}
    reclaim: true
    rules:
      - pattern: idle_session
        steps: [{action: warn}, {action: reclaim, after: 10m}]
`))
	if err != nil {
		t.Fatal(err)
	}
	tm, err := teams.Parse([]byte("team: {podLabel: team, default: unassigned}\n"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	e := &daemon.Escalator{Policy: pol, Log: lg, Actuators: map[string]action.Actuator{
		"webhook":    nopWarn{},
		"kubernetes": &kube.Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: policy.KubeEvict},
	}, Facts: &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: c.CoreV1()}}, Teams: tm}}
	t0 := time.Now().UTC().Truncate(time.Second)
	var evicted []string
	for _, m := range []int{0, 10, 20} {
		now := t0.Add(time.Duration(m) * time.Minute)
		var fs []finding.Finding
		for _, p := range []string{"serving/triton-0", "lab/nb-ann", "lab/nb-ben", "lab/batch-1"} {
			ns, name, _ := strings.Cut(p, "/")
			f := podFinding(ns, name, now)
			f.Team, f.User = "", "" // the telemetry knows no team
			fs = append(fs, f)
		}
		c.ClearActions()
		if _, err := e.Cycle(context.Background(), now, fs); err != nil {
			t.Fatal(err)
		}
		lists := 0
		for _, a := range c.Actions() {
			if a.GetVerb() == "list" {
				lists++
			}
		}
		if lists != 2 {
			t.Fatalf("cycle at +%dm: %d list calls, want 2 (pods, namespaces)", m, lists)
		}
		evicted = append(evicted, kubetest.Evictions(c)...)
	}
	sort.Strings(evicted)
	if got := strings.Join(evicted, ","); got != "lab/batch-1,lab/nb-ann" {
		t.Fatalf("evictions = %s, want lab/nb-ann and lab/batch-1 only", got)
	}
	evs, _ := lg.Events(context.Background(), audit.Filter{})
	got := map[string][]string{}
	for _, ev := range evs {
		if ev.State != audit.Intended {
			got[ev.Job] = append(got[ev.Job], ev.Tier+"/"+ev.Team+"/"+ev.Step+":"+string(ev.State))
		}
	}
	want := map[string]string{
		"serving/triton-0": "prod/search/warn:done prod/search/reclaim:skipped",
		"lab/nb-ann":       "notebooks/research/warn:done notebooks/research/reclaim:done",
		"lab/nb-ben":       "notebooks/research/exempt:skipped",
		"lab/batch-1":      "low/vision/warn:done low/vision/reclaim:done",
	}
	for job, w := range want {
		if g := strings.Join(got[job], " "); g != w {
			t.Errorf("audit of %s:\n got %s\nwant %s", job, g, w)
		}
	}
}
