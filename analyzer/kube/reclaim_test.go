package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
)

func ptr[T any](v T) *T { return &v }

func objects() []runtime.Object {
	return []runtime.Object{
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: "ml"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ml"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb-abc-xyz", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{
			{Kind: "ReplicaSet", Name: "nb-abc", Controller: ptr(true)}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "nb-abc", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{
			{Kind: "Deployment", Name: "nb", Controller: ptr(true)}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nb", Namespace: "ml"}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2))}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{
			{Kind: "StatefulSet", Name: "db", Controller: ptr(true)}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ml"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1))}},
	}
}

func podReq(pod string, attempt int) *action.Request {
	return &action.Request{Step: action.StepReclaim, Attempt: attempt, Finding: finding.Finding{Scheduler: "kubernetes", Namespace: "ml", Pod: pod, Job: "ml/" + pod}}
}

func TestReclaimEvictsTheRightPod(t *testing.T) {
	c := fake.NewClientset(objects()...)
	k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: "evict"}
	if _, err := k.Act(context.Background(), podReq("train-0", 1)); err != nil {
		t.Fatal(err)
	}
	if got := kubetest.Evictions(c); len(got) != 1 || got[0] != "ml/train-0" {
		t.Fatalf("evictions = %v, want [ml/train-0]", got)
	}
	if _, err := c.CoreV1().Pods("ml").Get(context.Background(), "other", metav1.GetOptions{}); err != nil {
		t.Fatalf("other pod touched: %v", err)
	}
	if _, err := k.Act(context.Background(), podReq("missing", 1)); !errors.Is(err, action.ErrGone) {
		t.Fatalf("missing pod: err = %v, want ErrGone", err)
	}
	if _, err := k.Act(context.Background(), podReq("Bad_Name", 1)); !errors.Is(err, action.ErrInvalid) {
		t.Fatalf("bad name: err = %v, want ErrInvalid", err)
	}
}

// A PodDisruptionBudget refuses with 429: retried later, deleted only when
// configured and only after enough refusals.
func TestReclaimPDBRefusal(t *testing.T) {
	for _, tc := range []struct {
		deleteAfter, attempt  int
		wantRetry, wantDelete bool
	}{
		{0, 1, true, false},
		{0, 9, true, false},
		{2, 2, true, false},
		{2, 3, false, true},
	} {
		c := fake.NewClientset(objects()...)
		c.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "eviction" {
				return false, nil, nil
			}
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
		})
		k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: "evict", DeleteAfterRefusals: tc.deleteAfter}
		detail, err := k.Act(context.Background(), podReq("train-0", tc.attempt))
		if got := errors.Is(err, action.ErrRetryLater); got != tc.wantRetry {
			t.Errorf("%+v: retry=%v (err %v)", tc, got, err)
		}
		_, getErr := c.CoreV1().Pods("ml").Get(context.Background(), "train-0", metav1.GetOptions{})
		if deleted := apierrors.IsNotFound(getErr); deleted != tc.wantDelete {
			t.Errorf("%+v: deleted=%v detail=%q", tc, deleted, detail)
		}
	}
}

func TestReclaimScaleOwner(t *testing.T) {
	c := fake.NewClientset(objects()...)
	kubetest.ScaleSubresource(c)
	k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: "scale_owner"}
	ctx := context.Background()
	detail, err := k.Act(ctx, podReq("nb-abc-xyz", 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range c.Actions() {
		if a.GetResource().Resource == "deployments" && a.GetSubresource() != "scale" {
			t.Errorf("touched the Deployment itself (%s), not its scale subresource", a.GetVerb())
		}
	}
	d, _ := c.AppsV1().Deployments("ml").Get(ctx, "nb", metav1.GetOptions{})
	if *d.Spec.Replicas != 0 || !strings.Contains(detail, "from 2 to 0") {
		t.Fatalf("deployment = %d replicas, audit detail %q", *d.Spec.Replicas, detail)
	}
	if _, err := k.Act(ctx, podReq("db-0", 1)); err != nil {
		t.Fatal(err)
	}
	s, _ := c.AppsV1().StatefulSets("ml").Get(ctx, "db", metav1.GetOptions{})
	if *s.Spec.Replicas != 0 {
		t.Fatalf("statefulset at %d replicas", *s.Spec.Replicas)
	}
	if len(kubetest.Evictions(c)) != 0 {
		t.Fatalf("owned pods evicted: %v", kubetest.Evictions(c))
	}
	out, _, err := k.Reconcile(ctx, podReq("nb-abc-xyz", 1))
	if err != nil || out != action.Applied {
		t.Fatalf("reconcile = %v %v, want applied", out, err)
	}
	// A bare pod has no owner: it is evicted instead.
	if _, err := k.Act(ctx, podReq("train-0", 1)); err != nil {
		t.Fatal(err)
	}
	if got := kubetest.Evictions(c); len(got) != 1 || got[0] != "ml/train-0" {
		t.Fatalf("evictions = %v", got)
	}
}

func TestReclaimReconcile(t *testing.T) {
	c := fake.NewClientset(objects()...)
	k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: "evict"}
	ctx := context.Background()
	if out, _, _ := k.Reconcile(ctx, podReq("train-0", 1)); out != action.NotApplied {
		t.Fatalf("running pod: %v", out)
	}
	if err := c.CoreV1().Pods("ml").Delete(ctx, "train-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := k.Reconcile(ctx, podReq("train-0", 1)); out != action.Applied {
		t.Fatalf("deleted pod: %v", out)
	}
}

// TestReclaimScaleOwnerRereadsOnConflict: the controller manager writes
// a Deployment's status while the reclaim runs, so the scale update's
// resourceVersion is stale now and then. The scale is read again and the
// reclaim goes through; a conflict that never ends is reported.
func TestReclaimScaleOwnerRereadsOnConflict(t *testing.T) {
	for _, tc := range []struct {
		conflicts int
		wantErr   bool
	}{{conflicts: 1}, {conflicts: 3}, {conflicts: 1000, wantErr: true}} {
		c := fake.NewClientset(objects()...)
		kubetest.ScaleSubresource(c)
		left := tc.conflicts
		c.PrependReactor("update", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "scale" || left == 0 {
				return false, nil, nil
			}
			left--
			return true, nil, apierrors.NewConflict(appsv1.Resource("deployments"), "nb", errors.New("the object has been modified"))
		})
		k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: "scale_owner"}
		detail, err := k.Act(context.Background(), podReq("nb-abc-xyz", 1))
		d, _ := c.AppsV1().Deployments("ml").Get(context.Background(), "nb", metav1.GetOptions{})
		if tc.wantErr {
			if !apierrors.IsConflict(err) || *d.Spec.Replicas != 2 {
				t.Errorf("%d conflicts: %q %v, %d replicas; want the conflict reported, 2 replicas", tc.conflicts, detail, err, *d.Spec.Replicas)
			}
			continue
		}
		if err != nil || *d.Spec.Replicas != 0 || !strings.Contains(detail, "from 2 to 0") {
			t.Errorf("%d conflicts: %q %v, %d replicas; want scaled from 2 to 0", tc.conflicts, detail, err, *d.Spec.Replicas)
		}
	}
}
