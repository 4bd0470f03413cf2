package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/schema"
)

// An owner reference is written by the controller that made the object,
// and the garbage collector deletes an object whose controller reference
// names no live object of that kind, name and UID: a reference that stays
// is a real owner. That, not a name or a label any pod author can write,
// is what the kind is read from.

// Owner is the workload at the top of a pod's controller chain.
type Owner struct {
	// Kind, APIVersion, Namespace and Name name it ("Notebook",
	// "kubeflow.org/v1", "research", "nb-1").
	Kind, APIVersion, Namespace, Name string
	// Via is the kind of the pod's own controller when the top owner is
	// above it (StatefulSet under a Notebook); "" when they are one.
	Via string
}

// String is how analyze and the job view name what decided the kind:
// "owner Notebook kubeflow.org/v1 research/nb-1".
func (o *Owner) String() string {
	return fmt.Sprintf("owner %s %s %s/%s", o.Kind, o.APIVersion, o.Namespace, o.Name)
}

// WorkloadKind is the workload kind the owner implies, and whether that is
// decisive: a Notebook's server is interactive and a Job's (or CronJob's)
// pod is batch whatever they are named, while a Deployment, StatefulSet or
// DaemonSet is a service unless a kind rule names the pod interactive (a
// Jupyter server an operator runs as a Deployment). "" when the kind says
// nothing gpuwatch knows (a custom resource other than a notebook).
func (o *Owner) WorkloadKind() (kind string, decisive bool) {
	switch o.Kind {
	case "Notebook":
		// Kubeflow's notebook controller (kubeflow.org) makes a StatefulSet
		// per notebook server; it is the only Notebook kind we know.
		return schema.KindInteractive, true
	case "Job", "CronJob":
		return schema.KindBatch, true
	case "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet":
		return schema.KindService, false
	}
	return "", false
}

// ownerKey finds an object's controller in the lists a lookup read.
type ownerKey struct{ kind, namespace, name string }

// controllers holds, for each intermediate controller a lookup needed
// (ReplicaSet, StatefulSet, Job), its own controller reference, or nil
// when it has none; a key absent means the object was not found.
type controllers map[ownerKey]*metav1.OwnerReference

// ownerLists reads the intermediate controllers the pods' references name,
// one paged list per kind that is needed, so the calls stay bounded
// whatever the number of pods. A kind that cannot be listed (a nil client,
// a refusal) is left out, so its pods' owners above it stay unknown; the
// error says which.
func ownerLists(ctx context.Context, apps appsv1client.AppsV1Interface, batch batchv1client.BatchV1Interface,
	need map[string]bool, limit int64) (controllers, error) {
	out := controllers{}
	var errs []error
	read := func(kind string, list func(cont string) (metav1.ListInterface, []metav1.Object, error)) {
		if !need[kind] {
			return
		}
		got := controllers{}
		for cont := ""; ; {
			l, items, err := list(cont)
			if err != nil {
				errs = append(errs, fmt.Errorf("list %s: %w", kind, err))
				return
			}
			for _, o := range items {
				got[ownerKey{kind, o.GetNamespace(), o.GetName()}] = controller(o.GetOwnerReferences())
			}
			if cont = l.GetContinue(); cont == "" {
				break
			}
		}
		maps.Copy(out, got)
	}
	opts := func(cont string) metav1.ListOptions { return metav1.ListOptions{Limit: limit, Continue: cont} }
	if apps != nil {
		read("ReplicaSet", func(cont string) (metav1.ListInterface, []metav1.Object, error) {
			l, err := apps.ReplicaSets("").List(ctx, opts(cont))
			if err != nil {
				return nil, nil, err
			}
			return l, metaOf(l.Items), nil
		})
		read("StatefulSet", func(cont string) (metav1.ListInterface, []metav1.Object, error) {
			l, err := apps.StatefulSets("").List(ctx, opts(cont))
			if err != nil {
				return nil, nil, err
			}
			return l, metaOf(l.Items), nil
		})
	}
	if batch != nil {
		read("Job", func(cont string) (metav1.ListInterface, []metav1.Object, error) {
			l, err := batch.Jobs("").List(ctx, opts(cont))
			if err != nil {
				return nil, nil, err
			}
			return l, metaOf(l.Items), nil
		})
	}
	return out, errors.Join(errs...)
}

// metaOf gives a list's items as their metadata.
func metaOf[T any, P interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, len(items))
	for i := range items {
		out[i] = P(&items[i])
	}
	return out
}

// topOwner walks a pod's controller references up one level (Pod ->
// ReplicaSet -> Deployment, Pod -> StatefulSet -> Notebook, Pod -> Job ->
// CronJob); nil for a pod no controller owns. ok is false when the pod's
// controller could not be read (not listed, gone), so its own owner is
// unknown and only its direct controller is known.
func topOwner(ns string, refs []metav1.OwnerReference, cs controllers) (o *Owner, ok bool) {
	ref := controller(refs)
	if ref == nil {
		return nil, true
	}
	direct := &Owner{Kind: ref.Kind, APIVersion: ref.APIVersion, Namespace: ns, Name: ref.Name}
	up, found := cs[ownerKey{ref.Kind, ns, ref.Name}]
	switch {
	case !found:
		return direct, !intermediate[ref.Kind]
	case up == nil:
		return direct, true
	}
	return &Owner{Kind: up.Kind, APIVersion: up.APIVersion, Namespace: ns, Name: up.Name, Via: ref.Kind}, true
}

// intermediate are the pod controllers that another controller may own.
var intermediate = map[string]bool{"ReplicaSet": true, "StatefulSet": true, "Job": true}

// setOwnerKind records the kind o implies on f; a pod with no controller
// (a KubeSpawner server, a bare pod) or whose chain could not be read is
// left to the name rules.
func setOwnerKind(f *facts.Facts, o *Owner, ok bool) {
	if o == nil || !ok {
		return
	}
	k, decisive := o.WorkloadKind()
	switch {
	case k == "":
	case decisive:
		f.SetOwnerKind(k, o.String())
	default:
		f.OwnerKind, f.OwnerKindSource = k, o.String()
	}
}
