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
// the API server (kwok runs them), their servers on the real Hub. The
// actuator finds the Hub user and server from the pod the API server
// returns, and stops the server through the Hub, not the pod; the other
// user's server and every pod stay. A pod the Hub does not own (no
// KubeSpawner annotations) goes to the Kubernetes actuator, whose eviction
// the API server carries out. A pod that is gone from the API is gone for
// the actuator too.
func TestRealJupyterHubOnKubeSpawnerPods(t *testing.T) {
	hub := actiontest.StartHub(t)
	cs := testkube.Admin(t)
	ns := testkube.Namespace(t, cs, nil)
	ctx := context.Background()
	hub.Start("alice", "")
	hub.Start("bob", "lab")
	alice := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "alice", ""))
	bob := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "bob", "lab"))
	plain := testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "not-a-notebook", Namespace: ns}})

	reclaim := &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"}
	j := &action.JupyterHub{URL: hub.URL, TokenFile: hub.TokenFile, Pods: &kube.Pods{Core: cs.CoreV1()}, Next: reclaim}
	// Each reclaim carries the proof the escalator makes from the API
	// server's facts: the finding is on the pod's node since its creation.
	req := func(pod string) *action.Request {
		r := &action.Request{Step: action.StepReclaim, Finding: finding.Finding{Pattern: schema.IdleSession,
			Scheduler: schema.SchedulerKubernetes, Namespace: ns, Pod: pod, Job: ns + "/" + pod}}
		got, err := (&kube.Facts{Core: cs.CoreV1()}).Lookup(ctx, []string{ns + "/" + pod})
		if fa := got[ns+"/"+pod]; err == nil && fa != nil && len(fa.Identity.Nodes) > 0 {
			r.Finding.Hostname, r.Finding.Start = fa.Identity.Nodes[0], fa.Identity.Since
			p := target.Prove(&r.Finding, fa, "")
			r.Target = &p
		}
		return r
	}

	d, err := j.Act(ctx, req(alice.Name))
	if err != nil || !strings.Contains(d, "stopped the server of alice") {
		t.Fatalf("stop alice's notebook: %q %v", d, err)
	}
	if hub.Running("alice", "") || !hub.Running("bob", "lab") {
		t.Fatalf("after alice's stop: alice running %v (want false), bob's lab %v (want true)", hub.Running("alice", ""), hub.Running("bob", "lab"))
	}
	if out, _, err := j.Reconcile(ctx, req(alice.Name)); err != nil || out != action.Applied {
		t.Errorf("reconcile alice's stop: %v %v", out, err)
	}
	if d, err := j.Act(ctx, req(bob.Name)); err != nil || !strings.Contains(d, "server lab of bob") || hub.Running("bob", "lab") {
		t.Errorf("stop bob's named server: %q %v", d, err)
	}
	// The Hub stopped the servers; the pods are KubeSpawner's to delete,
	// and the actuator evicted neither.
	for _, p := range []*corev1.Pod{alice, bob} {
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			t.Errorf("pod %s after the Hub stopped its server: %v", p.Name, err)
		}
	}

	// Not the Hub's: evicted through the API server.
	if d, err := j.Act(ctx, req(plain.Name)); err != nil || !strings.HasPrefix(d, "evicted pod") {
		t.Fatalf("a pod without KubeSpawner's annotations: %q %v, want the Kubernetes actuator's eviction", d, err)
	}
	testkube.Eventually(t, 60*time.Second, "pod "+ns+"/"+plain.Name+" gone", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, plain.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if _, err := j.Act(ctx, req(plain.Name)); !errors.Is(err, action.ErrGone) {
		t.Errorf("the evicted pod again: %v, want gone", err)
	}
}
