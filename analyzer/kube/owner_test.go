package kube_test

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/schema"
)

func ctrl(apiVersion, kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: &yes}}
}

func meta(name string, owners []metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "research", OwnerReferences: owners}
}

// ownerFleet: a Notebook's StatefulSet whose pod is named like a training
// job, a KubeSpawner-named pod that a CronJob's Job runs, a Deployment's
// pod, a plain StatefulSet's, and a bare jupyter-<user> pod.
func ownerFleet() []runtime.Object {
	return []runtime.Object{
		&appsv1.StatefulSet{ObjectMeta: meta("train-job", ctrl("kubeflow.org/v1", "Notebook", "nb-1"))},
		&corev1.Pod{ObjectMeta: meta("train-job-7", ctrl("apps/v1", "StatefulSet", "train-job"))},
		&batchv1.Job{ObjectMeta: meta("nightly-29000", ctrl("batch/v1", "CronJob", "nightly"))},
		&corev1.Pod{ObjectMeta: meta("jupyter-nightly", ctrl("batch/v1", "Job", "nightly-29000"))},
		&appsv1.ReplicaSet{ObjectMeta: meta("embed-7d9f8", ctrl("apps/v1", "Deployment", "embed"))},
		&corev1.Pod{ObjectMeta: meta("embed-7d9f8-x2x4z", ctrl("apps/v1", "ReplicaSet", "embed-7d9f8"))},
		&appsv1.StatefulSet{ObjectMeta: meta("db", nil)},
		&corev1.Pod{ObjectMeta: meta("db-0", ctrl("apps/v1", "StatefulSet", "db"))},
		&corev1.Pod{ObjectMeta: meta("jupyter-alice", nil)},
	}
}

type kindWant struct{ pod, kind, source string }

var ownerWants = []kindWant{
	{"train-job-7", schema.KindInteractive, "owner Notebook kubeflow.org/v1 research/nb-1"},
	{"jupyter-nightly", schema.KindBatch, "owner CronJob batch/v1 research/nightly"},
	{"embed-7d9f8-x2x4z", schema.KindService, "owner Deployment apps/v1 research/embed"},
	{"db-0", schema.KindService, "owner StatefulSet apps/v1 research/db"},
	{"jupyter-alice", schema.KindInteractive, facts.KindFromName},
}

func resolveKinds(t *testing.T, src *kube.Facts, ws []kindWant) {
	t.Helper()
	fs := make([]finding.Finding, len(ws))
	for i, w := range ws {
		fs[i] = finding.Finding{Pattern: schema.Stuck, Scheduler: schema.SchedulerKubernetes, Namespace: "research", Pod: w.pod, Job: "research/" + w.pod}
	}
	r := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: src}}
	got := r.Resolve(context.Background(), fs)
	for i, w := range ws {
		k, _, why := got[i].Value(schema.AttrKind)
		if k != w.kind || got[i].KindSource != w.source {
			t.Errorf("%s: kind %q from %q (%s), want %q from %q", w.pod, k, got[i].KindSource, why, w.kind, w.source)
		}
	}
}

// TestKindFromOwners: the kind is read from the controller chain, so a
// Notebook's pod named train-job-7 is interactive and a CronJob's pod named
// jupyter-* is batch; only a pod no controller owns falls to its name.
func TestKindFromOwners(t *testing.T) {
	c := fake.NewClientset(ownerFleet()...)
	resolveKinds(t, &kube.Facts{Core: c.CoreV1(), Apps: c.AppsV1(), Batch: c.BatchV1(), PageSize: 2}, ownerWants)
}

// TestKindOwnersUnreadable: when the controllers cannot be listed (RBAC
// refuses), an owner above the pod's controller is unknown, so it is not
// guessed from the controller: the Notebook's pod falls to its name, while
// the Jobs, which could be listed, still decide.
func TestKindOwnersUnreadable(t *testing.T) {
	c := fake.NewClientset(ownerFleet()...)
	c.PrependReactor("list", "statefulsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("statefulsets is forbidden")
	})
	resolveKinds(t, &kube.Facts{Core: c.CoreV1(), Apps: c.AppsV1(), Batch: c.BatchV1()}, []kindWant{
		{"train-job-7", schema.KindBatch, facts.KindFromName},
		{"jupyter-nightly", schema.KindBatch, "owner CronJob batch/v1 research/nightly"},
		{"jupyter-alice", schema.KindInteractive, facts.KindFromName},
	})
}
