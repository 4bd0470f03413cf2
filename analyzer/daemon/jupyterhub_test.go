package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

const notebookPolicy = `
dry_run: false
min_warning: 30m
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: notebooks
    match: {namespaces: [jhub]}
    reclaim: true
    rules:
      - pattern: idle_session
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 1h}]
`

// notebooks: five JupyterHub notebooks on one node; bob's is in use, the
// others go idle after 20 minutes.
const notebooks = `
name: notebooks
origin: 2026-03-02T00:00:00Z
fleet: [{hostname: node-k, model: H100-SXM5-80GB, gpus: 5}]
workloads:
  - {id: jupyter-alice, scheduler: kubernetes, namespace: jhub, user: alice, team: ml, node: node-k, gpus: [0], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: jupyter-bob--lab, scheduler: kubernetes, namespace: jhub, user: bob, team: ml, node: node-k, gpus: [1], start: 0s, duration: 10h, behaviour: notebook}
  - {id: jupyter-carol, scheduler: kubernetes, namespace: jhub, user: carol, team: ml, node: node-k, gpus: [2], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: jupyter-dave, scheduler: kubernetes, namespace: jhub, user: dave, team: ml, node: node-k, gpus: [3], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: jupyter-erin, scheduler: kubernetes, namespace: jhub, user: erin, team: ml, node: node-k, gpus: [4], start: 0s, duration: 10h, behaviour: idle_notebook}
`

// byJob gives each pod (namespace/name) its own JupyterHub actuator (a
// wrong token for dave's, a Hub that is down for erin's, the policy's
// fallback or not), as one fleet would meet them.
type byJob map[string]action.Actuator

func (b byJob) Name() string { return "kubernetes" }
func (b byJob) Act(ctx context.Context, req *action.Request) (string, error) {
	return b[req.Finding.Job].Act(ctx, req)
}

// reclaimSteps is the audit of a job's steps, with the detail of the
// reclaim's outcome.
func reclaimSteps(t *testing.T, r *rig, job string) string {
	t.Helper()
	evs, err := r.log.Events(context.Background(), audit.Filter{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		s := e.Step + ":" + string(e.State)
		if e.Step == action.StepReclaim && e.State != audit.Intended {
			s += "(" + e.Detail + ")"
		}
		got = append(got, s)
	}
	return strings.Join(got, " ")
}

// The engine's idle_session findings on simulated notebooks escalate
// through the policy to the real JupyterHub: after the warning, idle
// servers are stopped through the Hub API and the one in use is not; a
// server its user already stopped, a wrong token and a Hub that is down
// are each audited for what they are, and nothing is evicted.
func TestIdleNotebooksStopThroughJupyterHub(t *testing.T) {
	t.Parallel()
	hub := actiontest.StartHub(t, "jhub")
	hub.Start("alice", "")
	hub.Start("bob", "lab")
	hub.Start("carol", "")
	hub.Start("dave", "")
	hub.Start("erin", "")
	var pods []*corev1.Pod
	for _, p := range []struct{ pod, user, server string }{{"jupyter-alice", "alice", ""}, {"jupyter-bob--lab", "bob", "lab"},
		{"jupyter-carol", "carol", ""}, {"jupyter-dave", "dave", ""}, {"jupyter-erin", "erin", ""}} {
		ann := map[string]string{action.AnnotationHubUser: p.user}
		if p.server != "" {
			ann[action.AnnotationHubServer] = p.server
		}
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.pod, Namespace: "jhub", Annotations: ann},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	}
	client := fake.NewClientset(pods[0], pods[1], pods[2], pods[3], pods[4])
	reclaim := &kube.Reclaim{Core: client.CoreV1(), Apps: client.AppsV1(), Mode: "evict"}
	good := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}
	badToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(badToken, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	acts := byJob{"jhub/jupyter-alice": good, "jhub/jupyter-bob--lab": good, "jhub/jupyter-carol": good,
		"jhub/jupyter-dave": &action.JupyterHub{URL: hub.URL, TokenFile: badToken, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim},
		"jhub/jupyter-erin": &action.JupyterHub{URL: actiontest.ClosedURL(t), TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}}

	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r, d := engineRigFor(t, notebooks, origin, 0, 0)
	r2 := newRig(t, notebookPolicy, nil)
	r.esc.Policy = r2.policy
	r.esc.Actuators["kubernetes"] = acts
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5*time.Hour + 30*time.Minute)); now = now.Add(5 * time.Minute) {
		if now.Equal(origin.Add(2 * time.Hour)) {
			hub.Stop("carol", "") // carol closed her notebook after the warning
		}
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(context.Background()); err != nil {
			t.Fatalf("cycle at %s: %v", now.Sub(origin), err)
		}
	}
	if hub.Running("alice", "") || !hub.Running("bob", "lab") || !hub.Running("dave", "") || !hub.Running("erin", "") {
		t.Errorf("alice %v (want stopped), bob %v, dave %v, erin %v (want running)", hub.Running("alice", ""),
			hub.Running("bob", "lab"), hub.Running("dave", ""), hub.Running("erin", ""))
	}
	if ev := kubetest.Evictions(client); len(ev) != 0 {
		t.Errorf("evicted %v without a fallback in the policy", ev)
	}
	for pod, want := range map[string][]string{
		"jupyter-alice":    {`warn:intended warn:done reclaim:intended reclaim:done(stopped the server of "alice" through JupyterHub)`},
		"jupyter-bob--lab": {""},
		"jupyter-carol":    {"reclaim:skipped(", "already stopped"},
		"jupyter-dave":     {"reclaim:failed(", "refused the token"},
		"jupyter-erin":     {"reclaim:failed(", "JupyterHub unreachable"},
	} {
		got := reclaimSteps(t, r, "jhub/"+pod)
		for _, w := range want {
			if !strings.Contains(got, w) || (w == "" && got != "") {
				t.Errorf("%s: audit %q, want %q", pod, got, w)
			}
		}
		if strings.Contains(got, "wrong") {
			t.Errorf("%s: the token is in the audit: %q", pod, got)
		}
	}
}

// takeoverPolicy reclaims idle notebooks in the Hub's namespace and in a
// user's own.
const takeoverPolicy = `
dry_run: false
min_warning: 30m
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: notebooks
    match: {namespaces: [%s, %s]}
    reclaim: true
    rules:
      - pattern: idle_session
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 1h}]
`

// takeover: alice's idle notebook and bob's two busy ones run in the
// Hub's namespace on one node; on the other, mallory runs two idle pods in
// her own, named and annotated as bob's servers. The nodes are the API
// server's.
const takeover = `
name: takeover
origin: %[1]s
fleet: [{hostname: %[2]s, model: H100-SXM5-80GB, gpus: 3}, {hostname: %[3]s, model: H100-SXM5-80GB, gpus: 2}]
workloads:
  - {id: jupyter-alice, scheduler: kubernetes, namespace: %[4]s, user: alice, team: ml, node: %[2]s, gpus: [0], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: jupyter-bob, scheduler: kubernetes, namespace: %[4]s, user: bob, team: ml, node: %[2]s, gpus: [1], start: 0s, duration: 10h, behaviour: notebook}
  - {id: jupyter-bob--lab, scheduler: kubernetes, namespace: %[4]s, user: bob, team: ml, node: %[2]s, gpus: [2], start: 0s, duration: 10h, behaviour: notebook}
  - {id: jupyter-bob, scheduler: kubernetes, namespace: %[5]s, user: mallory, team: ml, node: %[3]s, gpus: [0], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: jupyter-bob--lab, scheduler: kubernetes, namespace: %[5]s, user: mallory, team: ml, node: %[3]s, gpus: [1], start: 0s, duration: 10h, behaviour: idle_notebook}
`

// notebookPod is a pod as KubeSpawner makes one for user's server,
// annotated with their names; in mallory's namespace she wrote it so.
func notebookPod(ns, name, user, server string) *corev1.Pod {
	ann := map[string]string{action.AnnotationHubUser: user}
	if server != "" {
		ann[action.AnnotationHubServer] = server
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann,
		Labels: map[string]string{"component": "singleuser-server"}}}
}

// Mallory's idle pods in her own namespace carry bob's name in
// KubeSpawner's annotations (and his pods' names). The engine's
// idle_session findings on them escalate through the policy on the real
// API server and the real Hub: bob's servers, which the Hub's records put
// in the Hub's namespace, keep running; the pod whose actuator has the
// policy's fallback is evicted, the other is left and the audit says no
// Hub server runs in it. Alice's idle notebook, which the Hub's record
// names, is stopped through the Hub.
func TestNotebookAnnotatedAsAnotherUsersIsNotTheirs(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	hubNS, mallory := testkube.Namespace(t, cs, nil), testkube.Namespace(t, cs, nil)
	nodes := testkube.Nodes(t)
	if len(nodes) < 2 {
		t.Fatalf("nodes %v: the test needs two", nodes)
	}
	hub := actiontest.StartHub(t, hubNS)
	hub.Start("alice", "")
	hub.Start("bob", "")
	hub.Start("bob", "lab")
	for _, p := range []*corev1.Pod{notebookPod(hubNS, "jupyter-alice", "alice", ""), notebookPod(hubNS, "jupyter-bob", "bob", ""),
		notebookPod(hubNS, "jupyter-bob--lab", "bob", "lab"), notebookPod(mallory, "jupyter-bob", "bob", ""),
		notebookPod(mallory, "jupyter-bob--lab", "bob", "lab")} {
		p.Spec.NodeName = nodes[0]
		if p.Namespace == mallory {
			p.Spec.NodeName = nodes[1]
		}
		testkube.RunningPod(t, cs, p)
	}
	reclaim := &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"}
	hubActuator := func(fallback bool) *action.JupyterHub {
		return &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: cs.CoreV1()}, Next: reclaim, FallbackEvict: fallback}
	}
	acts := byJob{hubNS + "/jupyter-alice": hubActuator(false), mallory + "/jupyter-bob": hubActuator(false),
		mallory + "/jupyter-bob--lab": hubActuator(true)}

	// The evidence starts after the pods were created.
	origin := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	r, d := engineRigFor(t, fmt.Sprintf(takeover, origin.Format(time.RFC3339), nodes[0], nodes[1], hubNS, mallory), origin, 0, 0)
	r.esc.Policy = newRig(t, fmt.Sprintf(takeoverPolicy, hubNS, mallory), nil).policy
	r.esc.Actuators["kubernetes"] = acts
	// The facts, and the target proof made of them, are the API server's:
	// the pods' nodes, creation times and UIDs.
	r.esc.Facts = &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: cs.CoreV1()}}}
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5*time.Hour + 30*time.Minute)); now = now.Add(5 * time.Minute) {
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(context.Background()); err != nil {
			t.Fatalf("cycle at %s: %v", now.Sub(origin), err)
		}
	}
	if hub.Running("alice", "") || !hub.Running("bob", "") || !hub.Running("bob", "lab") {
		t.Errorf("alice running %v (want stopped), bob %v and bob's lab %v (want running)", hub.Running("alice", ""),
			hub.Running("bob", ""), hub.Running("bob", "lab"))
	}
	exists := func(ns, name string) bool {
		_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	testtool.Eventually(t, 60*time.Second, "mallory's evicted pod gone", func() (bool, error) { return !exists(mallory, "jupyter-bob--lab"), nil })
	if !exists(mallory, "jupyter-bob") || !exists(hubNS, "jupyter-bob") || !exists(hubNS, "jupyter-bob--lab") || !exists(hubNS, "jupyter-alice") {
		t.Errorf("a pod other than mallory's evicted one is gone")
	}
	for job, want := range map[string][]string{
		hubNS + "/jupyter-alice":      {`reclaim:done(stopped the server of "alice" through JupyterHub)`},
		hubNS + "/jupyter-bob":        {""},
		hubNS + "/jupyter-bob--lab":   {""},
		mallory + "/jupyter-bob":      {"reclaim:skipped(", "no JupyterHub server runs in pod " + mallory + "/jupyter-bob (", `names "bob"`, "jupyterhub_fallback is not evict"},
		mallory + "/jupyter-bob--lab": {"reclaim:done(", "no JupyterHub server runs in pod " + mallory + "/jupyter-bob--lab", "the policy's fallback: evicted pod " + mallory + "/jupyter-bob--lab"},
	} {
		got := reclaimSteps(t, r, job)
		t.Logf("%s: %s", job, got)
		for _, w := range want {
			if !strings.Contains(got, w) || (w == "" && got != "") {
				t.Errorf("%s: audit %q, want %q", job, got, w)
			}
		}
	}
}
