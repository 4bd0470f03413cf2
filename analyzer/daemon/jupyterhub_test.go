package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
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

// byPod gives each pod its own JupyterHub actuator (a wrong token for
// dave's, a Hub that is down for erin's), as one fleet would meet them.
type byPod map[string]action.Actuator

func (b byPod) Name() string { return "kubernetes" }
func (b byPod) Act(ctx context.Context, req *action.Request) (string, error) {
	return b[req.Finding.Pod].Act(ctx, req)
}

// The engine's idle_session findings on simulated notebooks escalate
// through the policy to the real JupyterHub: after the warning, idle
// servers are stopped through the Hub API and the one in use is not; a
// server its user already stopped, a wrong token and a Hub that is down
// are each audited for what they are, and nothing is evicted.
func TestIdleNotebooksStopThroughJupyterHub(t *testing.T) {
	hub := actiontest.StartHub(t)
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
	acts := byPod{"jupyter-alice": good, "jupyter-bob--lab": good, "jupyter-carol": good,
		"jupyter-dave": &action.JupyterHub{URL: hub.URL, TokenFile: badToken, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim},
		"jupyter-erin": &action.JupyterHub{URL: actiontest.ClosedURL(t), TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: client.CoreV1()}, Next: reclaim}}

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
	steps := func(pod string) string {
		evs, err := r.log.Events(context.Background(), audit.Filter{Job: "jhub/" + pod})
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
	for pod, want := range map[string][]string{
		"jupyter-alice":    {"warn:intended warn:done reclaim:intended reclaim:done(stopped the server of alice through JupyterHub)"},
		"jupyter-bob--lab": {""},
		"jupyter-carol":    {"reclaim:skipped(", "already stopped"},
		"jupyter-dave":     {"reclaim:failed(", "refused the token"},
		"jupyter-erin":     {"reclaim:failed(", "JupyterHub unreachable"},
	} {
		got := steps(pod)
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
