package action_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/actiontest"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestKindFromRealJupyterHubRecord: pods on the API server, the real Hub's
// records naming alice's. Alice's pod is interactive from the Hub's
// record; mallory's pod, named and annotated as KubeSpawner names its
// pods but recorded by no Hub server, is batch, not interactive by its
// name; with the Hub down neither is decided by name: the kind is
// missing and says the Hub was unreachable. A pod no controller owns is
// all the Hub decides; the resolver's name rules (jupyter-) would have
// made both interactive.
func TestKindFromRealJupyterHubRecord(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ns := testkube.Namespace(t, cs, nil)
	hub := actiontest.StartHub(t, ns)
	hub.Start("alice", "")
	alice := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "alice", ""))
	mallory := testkube.RunningPod(t, cs, kubeSpawnerPod(ns, "mallory", ""))
	if gotNS, pod := hub.PodOf("alice", ""); gotNS != ns || pod != alice.Name {
		t.Fatalf("the Hub's record of alice's server names %s/%s, want %s/%s", gotNS, pod, ns, alice.Name)
	}
	kinds := func(hubURL string) map[string]*facts.Facts {
		src := &facts.HubKinds{Source: &kube.Facts{Core: cs.CoreV1(), Apps: cs.AppsV1(), Batch: cs.BatchV1()},
			Hub: &action.JupyterHub{URL: hubURL, TokenFile: hub.TokenFile}}
		r := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: src}}
		out := map[string]*facts.Facts{}
		fs := []finding.Finding{idleOn(alice), idleOn(mallory)}
		for i, fa := range r.Resolve(context.Background(), fs) {
			out[fs[i].Pod] = fa
		}
		return out
	}

	got := kinds(hub.URL)
	for pod, want := range map[string][2]string{alice.Name: {schema.KindInteractive, facts.KindFromHub},
		mallory.Name: {schema.KindBatch, facts.KindNotInHub}} {
		fa := got[pod]
		if k, ok, why := fa.Value(schema.AttrKind); !ok || k != want[0] || fa.KindSource != want[1] {
			t.Errorf("Hub up: pod %s kind %q (known %v, missing %q) from %q, want %s from %q", pod, k, ok, why, fa.KindSource, want[0], want[1])
		}
	}

	got = kinds(actiontest.ClosedURL(t))
	for _, pod := range []string{alice.Name, mallory.Name} {
		fa := got[pod]
		if k, ok, why := fa.Value(schema.AttrKind); ok || why == "" || fa.KindSource != facts.KindHubUnreachable {
			t.Errorf("Hub down: pod %s kind %q (known %v, missing %q) from %q, want missing from %q", pod, k, ok, why, fa.KindSource, facts.KindHubUnreachable)
		}
	}
}

// idleOn is an idle_session finding on pod p.
func idleOn(p *corev1.Pod) finding.Finding {
	return finding.Finding{Pattern: schema.IdleSession, Scheduler: schema.SchedulerKubernetes,
		Namespace: p.Namespace, Pod: p.Name, Job: p.Namespace + "/" + p.Name}
}
