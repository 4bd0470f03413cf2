package kube

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Facts is the facts.Source of Kubernetes findings: it reads pod labels,
// annotations and owner, and namespace labels, from the API server: one
// list of pods and one of namespaces per cycle, whatever the number of
// findings.
type Facts struct {
	// Core is the API server's core group: pods and namespaces.
	Core corev1client.CoreV1Interface
	// Apps and Batch read the pods' controllers (ReplicaSets, StatefulSets,
	// Jobs) for their owners, from which the kind is read; nil leaves the
	// kind to the pod's own controller and the name rules.
	Apps  appsv1client.AppsV1Interface
	Batch batchv1client.BatchV1Interface
	// PageSize bounds each list response (default 500).
	PageSize int64
}

// Scheduler implements facts.Source.
func (k *Facts) Scheduler() string { return schema.SchedulerKubernetes }

// Lookup implements facts.Source. Jobs are "namespace/pod".
func (k *Facts) Lookup(ctx context.Context, jobs []string) (map[string]*facts.Facts, error) {
	want := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	limit := k.PageSize
	if limit <= 0 {
		limit = 500
	}
	nsLabels := map[string]map[string]string{}
	for cont := ""; ; {
		l, err := k.Core.Namespaces().List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list namespaces: %w", err)
		}
		for i := range l.Items {
			nsLabels[l.Items[i].Name] = l.Items[i].Labels
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	res := make(map[string]*facts.Facts, len(jobs))
	refs := map[string][]metav1.OwnerReference{}
	need := map[string]bool{}
	for cont := ""; ; {
		l, err := k.Core.Pods("").List(ctx, metav1.ListOptions{Limit: limit, Continue: cont})
		if err != nil {
			return nil, fmt.Errorf("list pods: %w", err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			id := p.Namespace + "/" + p.Name
			if !want[id] {
				continue
			}
			f := &facts.Facts{Scheduler: schema.SchedulerKubernetes, State: string(p.Status.Phase)}
			f.Set(schema.AttrNamespace, p.Namespace)
			f.SetMap(schema.AttrPodLabels, maps.Clone(p.Labels))
			f.SetMap(schema.AttrPodAnnotations, maps.Clone(p.Annotations))
			owner := ""
			if r := controller(p.OwnerReferences); r != nil {
				owner = r.Kind
				need[r.Kind] = true
			}
			f.Set(schema.AttrOwner, owner)
			refs[id] = p.OwnerReferences
			if nl, ok := nsLabels[p.Namespace]; ok {
				f.SetMap(schema.AttrNamespaceLabels, maps.Clone(nl))
			} else {
				f.Missing = map[schema.Attr]string{schema.AttrNamespaceLabels: "namespace " + p.Namespace + " not listed"}
			}
			if p.Status.StartTime != nil {
				f.Start = p.Status.StartTime.UTC()
			}
			f.Identity = Identity(p)
			res[id] = f
		}
		if cont = l.Continue; cont == "" {
			break
		}
	}
	// Controllers that could not be listed leave their pods' kinds to the
	// names: an owner not read is not guessed.
	cs, _ := ownerLists(ctx, k.Apps, k.Batch, need, limit)
	for id, f := range res {
		o, ok := topOwner(f.Alloc.Namespace, refs[id], cs)
		setOwnerKind(f, o, ok)
	}
	return res, nil
}

// Identity is the identity of the workload pod p is: its node, its
// creation (a pod recreated under the same name is created anew) and UID.
func Identity(p *corev1.Pod) facts.Identity {
	id := facts.Identity{Since: p.CreationTimestamp.UTC(), UID: string(p.UID)}
	if p.CreationTimestamp.IsZero() {
		id.Since = time.Time{}
	}
	if p.Spec.NodeName != "" {
		id.Nodes = []string{p.Spec.NodeName}
	}
	return id
}
