package action_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// kubeSpawnerPod is a notebook pod as KubeSpawner (z2jh's default spawner)
// makes one: named jupyter-<user>[--<server>], labelled
// component=singleuser-server with the escaped user name, and annotated
// with the user's and the server's real names, which the actuator reads.
func kubeSpawnerPod(ns, user, server string) *corev1.Pod {
	name := "jupyter-" + user
	ann := map[string]string{action.AnnotationHubUser: user}
	labels := map[string]string{"app": "jupyterhub", "component": "singleuser-server", "hub.jupyter.org/username": user}
	if server != "" {
		name += "--" + server
		ann[action.AnnotationHubServer] = server
		labels["hub.jupyter.org/servername"] = server
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: ann}}
}

// TestRealJupyterHubOnKubeSpawnerPods: notebook pods as real objects on
// the API server (kwok runs them), their servers on the real Hub, whose
// records name the pods. The actuator stops the server whose Hub record
// names the pod, not the pod; the other servers and every pod stay.
// Mallory's idle pod in her own namespace, annotated with bob's name
// (and even named as bob's pod is), stops none of bob's servers: without
// the policy's fallback it is skipped, with it the API server evicts
// that pod. A pod the Hub does not own (no KubeSpawner annotations) goes
// to the Kubernetes actuator. A pod that is gone from the API is gone for
// the actuator too.
func TestRealJupyterHubOnKubeSpawnerPods(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ns := testkube.Namespace(t, cs, nil)
	mallory := testkube.Namespace(t, cs, nil)
	hub := actiontest.StartHub(t, ns)
	ctx := context.Background()
	hub.Start("alice", "")
	hub.Start("bob", "")
	hub.Start("bob", "lab")
	alice := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "alice", ""))
	bob := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "bob", ""))
	bobLab := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "bob", "lab"))
	fake := testkube.RunningPod(t, cs, kubeSpawnerPod(mallory, "bob", ""))
	fakeLab := testkube.RunningPod(t, cs, kubeSpawnerPod(mallory, "bob", "lab"))
	plain := testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "not-a-notebook", Namespace: ns}})

	reclaim := &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"}
	j := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: cs.CoreV1()}, Next: reclaim}
	// Each reclaim carries the proof the escalator makes from the API
	// server's facts: the finding is on the pod's node since its creation.
	req := func(p *corev1.Pod) *action.Request {
		job := p.Namespace + "/" + p.Name
		r := &action.Request{Step: action.StepReclaim, Finding: finding.Finding{Pattern: schema.IdleSession,
			Scheduler: schema.SchedulerKubernetes, Namespace: p.Namespace, Pod: p.Name, Job: job}}
		got, err := (&kube.Facts{Core: cs.CoreV1()}).Lookup(ctx, []string{job})
		if fa := got[job]; err == nil && fa != nil && len(fa.Identity.Nodes) > 0 {
			r.Finding.Hostname, r.Finding.Start = fa.Identity.Nodes[0], fa.Identity.Since
			proof := target.Prove(&r.Finding, fa, "")
			r.Target = &proof
		}
		return r
	}
	bobRuns := func() bool { return hub.Running("bob", "") && hub.Running("bob", "lab") }
	podExists := func(p *corev1.Pod) bool {
		_, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	podGone := func(p *corev1.Pod) {
		testtool.Eventually(t, 60*time.Second, "pod "+p.Namespace+"/"+p.Name+" gone", func() (bool, error) { return !podExists(p), nil })
	}

	// Mallory's pods: no Hub call stops bob's servers.
	if _, err := j.Act(ctx, req(fake)); !errors.Is(err, action.ErrUnsupported) || !strings.Contains(err.Error(), "no JupyterHub server runs in pod "+mallory+"/jupyter-bob") {
		t.Errorf("mallory's pod annotated as bob's, no fallback: %v, want skipped", err)
	}
	if !bobRuns() || !podExists(fake) {
		t.Fatalf("without the fallback: bob's servers running %v (want true), mallory's pod there %v (want true)", bobRuns(), podExists(fake))
	}
	withFallback := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: cs.CoreV1()}, Next: reclaim, FallbackEvict: true}
	d, err := withFallback.Act(ctx, req(fakeLab))
	if err != nil || !strings.Contains(d, "the policy's fallback: evicted pod "+mallory+"/jupyter-bob--lab") {
		t.Fatalf("mallory's lab pod with the fallback: %q %v, want evicted", d, err)
	}
	podGone(fakeLab)
	if !bobRuns() || !podExists(bobLab) {
		t.Fatalf("after mallory's pod was evicted: bob's servers running %v, bob's lab pod there %v (want both)", bobRuns(), podExists(bobLab))
	}

	// Honest pods: the Hub's record names them, and their servers stop.
	if d, err := j.Act(ctx, req(alice)); err != nil || !strings.Contains(d, `stopped the server of "alice"`) {
		t.Fatalf("stop alice's notebook: %q %v", d, err)
	}
	if hub.Running("alice", "") || !bobRuns() {
		t.Fatalf("after alice's stop: alice running %v (want false), bob's servers %v (want true)", hub.Running("alice", ""), bobRuns())
	}
	if out, _, err := j.Reconcile(ctx, req(alice)); err != nil || out != action.Applied {
		t.Errorf("reconcile alice's stop: %v %v", out, err)
	}
	if d, err := j.Act(ctx, req(bobLab)); err != nil || !strings.Contains(d, `server "lab" of "bob"`) || hub.Running("bob", "lab") || !hub.Running("bob", "") {
		t.Errorf("stop bob's named server: %q %v; his default server must keep running", d, err)
	}
	// The Hub stopped the servers; the pods are KubeSpawner's to delete,
	// and the actuator evicted none of them.
	for _, p := range []*corev1.Pod{alice, bob, bobLab} {
		if !podExists(p) {
			t.Errorf("pod %s is gone after the Hub stopped a server", p.Name)
		}
	}

	// Not the Hub's: evicted through the API server.
	if d, err := j.Act(ctx, req(plain)); err != nil || !strings.HasPrefix(d, "evicted pod") {
		t.Fatalf("a pod without KubeSpawner's annotations: %q %v, want the Kubernetes actuator's eviction", d, err)
	}
	podGone(plain)
	if _, err := j.Act(ctx, req(plain)); !errors.Is(err, action.ErrGone) {
		t.Errorf("the evicted pod again: %v, want gone", err)
	}
}
