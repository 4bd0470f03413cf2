package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
)

func ptr[T any](v T) *T { return &v }

// reclaimT0 is when the evidence of the reclaim tests' findings begins.
var reclaimT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// objects are the API server's objects: every pod runs on gpu-node-0,
// was created an hour before the evidence, and has the UID "uid-<name>".
func objects() []runtime.Object {
	objs := rawObjects()
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p.UID, p.Spec.NodeName = types.UID("uid-"+p.Name), "gpu-node-0"
			p.CreationTimestamp = metav1.NewTime(reclaimT0.Add(-time.Hour))
		}
	}
	return objs
}

func rawObjects() []runtime.Object {
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
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-job-7", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{
			{Kind: "StatefulSet", Name: "train-job", Controller: ptr(true)}}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "train-job", Namespace: "ml", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "kubeflow.org/v1", Kind: "Notebook", Name: "nb-1", Controller: ptr(true)}}},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1))}},
	}
}

// podReq is a reclaim as the escalator makes it: the finding on
// gpu-node-0 since reclaimT0, with the proof that recorded the pod's UID.
func podReq(pod string, attempt int) *action.Request {
	return &action.Request{Step: action.StepReclaim, Attempt: attempt, Finding: finding.Finding{Scheduler: "kubernetes", Namespace: "ml",
		Pod: pod, Job: "ml/" + pod, Hostname: "gpu-node-0", Start: reclaimT0},
		Target: &target.Proof{Verdict: target.Proven, UID: "uid-" + pod}}
}

func TestReclaimEvictsTheRightPod(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// TestReclaimChecksTheTarget: the pod read right before the eviction must
// be the proof's (same UID, on the finding's node, created before the
// evidence); otherwise nothing is evicted, deleted or scaled, and the
// refusal says why. Every mode; hostile and missing proofs included.
func TestReclaimChecksTheTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(r *action.Request)
		want   string // "" when the reclaim goes ahead
	}{
		{"the proof's pod", nil, ""},
		{"recreated under the name", func(r *action.Request) { r.Target.UID = "uid-of-the-pod-before" }, "recreated under its name"},
		{"finding on another node", func(r *action.Request) { r.Finding.Hostname = "gpu-node-1" }, `host "gpu-node-1"`},
		{"pod created after the evidence", func(r *action.Request) { r.Finding.Start = reclaimT0.Add(-2 * time.Hour) }, "created"},
		{"no proof", func(r *action.Request) { r.Target = nil }, "no proof"},
		{"proof without uid", func(r *action.Request) { r.Target.UID = "" }, "no proof"},
		{"mismatch verdict", func(r *action.Request) { r.Target.Verdict = target.Mismatch }, "no proof"},
		{"unknown verdict", func(r *action.Request) { r.Target.Verdict = target.Unknown }, "no proof"},
		{"forged verdict word", func(r *action.Request) { r.Target.Verdict = "PROVEN" }, "no proof"},
		{"uid with a suffix", func(r *action.Request) { r.Target.UID += " " }, "recreated"},
		{"uid of another pod", func(r *action.Request) { r.Target.UID = "uid-other" }, "recreated"},
		{"evidence without start", func(r *action.Request) { r.Finding.Start = time.Time{} }, "no start"},
		{"evidence without host", func(r *action.Request) { r.Finding.Hostname = "" }, "names no host"},
	} {
		for _, mode := range []string{"evict", "delete", "scale_owner"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				c := fake.NewClientset(objects()...)
				kubetest.ScaleSubresource(c)
				k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: mode}
				req := podReq("nb-abc-xyz", 1)
				if tc.mutate != nil {
					tc.mutate(req)
				}
				_, err := k.Act(context.Background(), req)
				var writes []string
				for _, a := range c.Actions() {
					if v := a.GetVerb(); v != "get" && v != "list" && v != "watch" {
						writes = append(writes, v+" "+a.GetResource().Resource+"/"+a.GetSubresource())
					}
				}
				if tc.want == "" {
					if err != nil || len(writes) == 0 {
						t.Fatalf("err %v, writes %v", err, writes)
					}
					return
				}
				if !errors.Is(err, action.ErrRefused) || !strings.Contains(err.Error(), tc.want) || len(writes) != 0 {
					t.Fatalf("err %v, writes %v; want refused saying %q and no write", err, writes, tc.want)
				}
			})
		}
	}
}

// TestReclaimIsConditionalOnTheUID: the eviction and the delete carry the
// proof's UID as a precondition, so a pod recreated between the read and
// the write is never the one removed.
func TestReclaimIsConditionalOnTheUID(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"evict", "delete"} {
		c := fake.NewClientset(objects()...)
		k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: mode}
		if _, err := k.Act(context.Background(), podReq("train-0", 1)); err != nil {
			t.Fatal(err)
		}
		var uid string
		for _, a := range c.Actions() {
			switch a := a.(type) {
			case k8stesting.CreateAction:
				if ev, ok := a.GetObject().(*policyv1.Eviction); ok && ev.DeleteOptions != nil && ev.DeleteOptions.Preconditions != nil {
					uid = string(*ev.DeleteOptions.Preconditions.UID)
				}
			case k8stesting.DeleteAction:
				if o := a.GetDeleteOptions(); o.Preconditions != nil && o.Preconditions.UID != nil {
					uid = string(*o.Preconditions.UID)
				}
			}
		}
		if uid != "uid-train-0" {
			t.Errorf("%s: precondition uid %q, want uid-train-0", mode, uid)
		}
	}
}

// TestReclaimNeverUndoneByOwner: a notebook server's pod, whose StatefulSet
// a Notebook owns, is neither evicted nor scaled in any mode: the Notebook
// controller would start it again. The step is skipped and says why.
func TestReclaimNeverUndoneByOwner(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"evict", "scale_owner", "delete"} {
		c := fake.NewClientset(objects()...)
		k := &Reclaim{Core: c.CoreV1(), Apps: c.AppsV1(), Mode: mode}
		_, err := k.Act(context.Background(), podReq("train-job-7", 1))
		if !errors.Is(err, action.ErrUnsupported) || !strings.Contains(err.Error(), "owner Notebook kubeflow.org/v1 ml/nb-1") {
			t.Errorf("%s: err = %v, want the Notebook owner named and ErrUnsupported", mode, err)
		}
		if got := kubetest.Evictions(c); len(got) != 0 {
			t.Errorf("%s: evictions = %v, want none", mode, got)
		}
		if _, err := c.CoreV1().Pods("ml").Get(context.Background(), "train-job-7", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: pod gone: %v", mode, err)
		}
		if sts, _ := c.AppsV1().StatefulSets("ml").Get(context.Background(), "train-job", metav1.GetOptions{}); *sts.Spec.Replicas != 1 {
			t.Errorf("%s: StatefulSet scaled to %d", mode, *sts.Spec.Replicas)
		}
	}
}
