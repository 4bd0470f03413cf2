package facts

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// hubRecord is the Hub's record as a PodRecord: the pods it names, or the
// error reading it gave, and how often it was read.
type hubRecord struct {
	pods  map[string]bool
	err   error
	reads int
}

func (h *hubRecord) RecordedPods(context.Context) (map[string]bool, error) {
	h.reads++
	return h.pods, h.err
}

// kubePod is what kube.Facts reports of a pod: its controller's kind ("" for
// none) and, for a controller whose kind decides, that kind.
func kubePod(ns, owner string) *Facts {
	f := &Facts{Scheduler: schema.SchedulerKubernetes, State: "Running"}
	f.Set(schema.AttrNamespace, ns)
	f.Set(schema.AttrOwner, owner)
	switch owner {
	case "StatefulSet": // under a Notebook: decisive
		f.SetOwnerKind(schema.KindInteractive, "owner Notebook kubeflow.org/v1 "+ns+"/nb-1")
	case "ReplicaSet": // under a Deployment: a service unless a name rule says more
		f.OwnerKind, f.OwnerKindSource = schema.KindService, "owner Deployment apps/v1 "+ns+"/web"
	}
	return f
}

// kindOrderPods are one pod of each case the kind decision tells apart.
func kindOrderPods() *Table {
	return &Table{Name: schema.SchedulerKubernetes, Jobs: map[string]*Facts{
		"jhub/jupyter-alice":      kubePod("jhub", ""),          // recorded by the Hub
		"jhub/jupyter-mallory":    kubePod("jhub", ""),          // named like a notebook, not recorded
		"jhub/train-7":            kubePod("jhub", ""),          // bare pod, not recorded
		"kf/nb-1-0":               kubePod("kf", "StatefulSet"), // a Notebook's
		"web/jupyter-web-7d9f-x2": kubePod("web", "ReplicaSet"), // a Deployment's, named like a notebook
	}}
}

func resolveKinds(t *testing.T, src Source) map[string][3]string {
	t.Helper()
	var fs []finding.Finding
	for job := range kindOrderPods().Jobs {
		ns, pod, _ := strings.Cut(job, "/")
		fs = append(fs, finding.Finding{Scheduler: schema.SchedulerKubernetes, Job: job, Namespace: ns, Pod: pod, Pattern: schema.IdleSession})
	}
	r := &Resolver{Sources: map[string]Source{schema.SchedulerKubernetes: src}}
	out := map[string][3]string{}
	for i, fa := range r.Resolve(context.Background(), fs) {
		v, _, why := fa.Value(schema.AttrKind)
		out[fs[i].Job] = [3]string{v, fa.KindSource, why}
	}
	return out
}

// TestKindDecisionOrder: a decisive owner first (a Notebook's pod stays
// interactive whatever the Hub says); then, for a pod no controller owns,
// the Hub's record: interactive when it records the pod, batch when it
// does not, whatever the pod's name (jupyter-mallory is no notebook); the
// Hub unreachable leaves the kind missing, never decided by the name; a
// Deployment's pod is not the Hub's to say (a name rule may still make it
// interactive). With no Hub configured, names are the last resort and say
// so.
func TestKindDecisionOrder(t *testing.T) {
	hub := &hubRecord{pods: map[string]bool{"jhub/jupyter-alice": true, "kf/nb-1-0": false}}
	got := resolveKinds(t, &HubKinds{Source: kindOrderPods(), Hub: hub})
	want := map[string][3]string{
		"jhub/jupyter-alice":      {schema.KindInteractive, KindFromHub, ""},
		"jhub/jupyter-mallory":    {schema.KindBatch, KindNotInHub, ""},
		"jhub/train-7":            {schema.KindBatch, KindNotInHub, ""},
		"kf/nb-1-0":               {schema.KindInteractive, "owner Notebook kubeflow.org/v1 kf/nb-1", ""},
		"web/jupyter-web-7d9f-x2": {schema.KindInteractive, KindFromName, ""},
	}
	for job, w := range want {
		if got[job] != w {
			t.Errorf("Hub answering: %s: kind, source, missing %q, want %q", job, got[job], w)
		}
	}
	if hub.reads != 1 {
		t.Errorf("the Hub's record was read %d times for one cycle, want 1", hub.reads)
	}

	down := &hubRecord{err: errors.New("JupyterHub unreachable (GET /hub/api/users): connection refused")}
	got = resolveKinds(t, &HubKinds{Source: kindOrderPods(), Hub: down})
	for _, job := range []string{"jhub/jupyter-alice", "jhub/jupyter-mallory", "jhub/train-7"} {
		if g := got[job]; g[0] != "" || g[1] != KindHubUnreachable || g[2] != down.err.Error() {
			t.Errorf("Hub down: %s: kind, source, missing %q, want no kind, %q, missing %q", job, g, KindHubUnreachable, down.err)
		}
	}
	if g := got["kf/nb-1-0"]; g[0] != schema.KindInteractive || g[2] != "" {
		t.Errorf("Hub down: the Notebook's pod %q, want interactive from its owner", g)
	}

	got = resolveKinds(t, kindOrderPods())
	for job, k := range map[string]string{"jhub/jupyter-alice": schema.KindInteractive, "jhub/jupyter-mallory": schema.KindInteractive, "jhub/train-7": schema.KindBatch} {
		if g := got[job]; g[0] != k || g[1] != KindFromName {
			t.Errorf("no Hub: %s: %q, want %s from %q", job, g, k, KindFromName)
		}
	}
}

// TestHubRecordReadOncePerCycle: the engine's owner lookup and the
// escalator's facts of one cycle share one read of the Hub's record (its
// failure too); the next cycle reads it again; a cycle with no pod the Hub
// decides asks it nothing.
func TestHubRecordReadOncePerCycle(t *testing.T) {
	now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	hub := &hubRecord{err: errors.New("JupyterHub unreachable")}
	h := &HubKinds{Source: kindOrderPods(), Hub: hub, MaxAge: time.Minute, Now: func() time.Time { return now }}
	ctx := context.Background()
	for range 2 {
		if _, err := h.Lookup(ctx, []string{"jhub/jupyter-alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if hub.reads != 1 {
		t.Fatalf("two lookups within MaxAge read the Hub %d times, want 1", hub.reads)
	}
	now = now.Add(time.Minute)
	hub.err, hub.pods = nil, map[string]bool{"jhub/jupyter-alice": true}
	fs, err := h.Lookup(ctx, []string{"jhub/jupyter-alice", "kf/nb-1-0"})
	if err != nil || hub.reads != 2 {
		t.Fatalf("next cycle: %v, %d reads, want 2", err, hub.reads)
	}
	if f := fs["jhub/jupyter-alice"]; f.Alloc.Kind != schema.KindInteractive || f.KindSource != KindFromHub {
		t.Errorf("next cycle, Hub back: %q from %q, want interactive from the record", f.Alloc.Kind, f.KindSource)
	}
	now = now.Add(time.Hour)
	if _, err := h.Lookup(ctx, []string{"kf/nb-1-0", "web/jupyter-web-7d9f-x2"}); err != nil || hub.reads != 2 {
		t.Errorf("a cycle with only owned pods: %v, %d reads of the Hub, want none more", err, hub.reads)
	}
}
