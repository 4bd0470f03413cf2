package manifests

import (
	"context"
	"reflect"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/kube/kubetest"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// actuatorCalls runs the Kubernetes fact source and the Kubernetes actuator (both in analyzer/kube) through every
// mode it has (evict; evict refused by a disruption budget, then delete;
// delete; scale the owning Deployment or StatefulSet), the crash-recovery
// reconcile, and with cordon the out_of_service cordon, against client-go's fake clientset, and returns every API call
// it made as "group resource[/subresource] verb". This is the permission set
// the analyzer's ClusterRole must grant: no more, no less.
// rbacT0 is when the evidence of the reclaimed pods' findings begins.
var rbacT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func actuatorCalls(t *testing.T, cordon bool) []string {
	t.Helper()
	yes := true
	two := int32(2)
	pod := func(name string, owner *metav1.OwnerReference) *corev1.Pod {
		// On the findings' node since before their evidence, with a UID.
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(rbacT0.Add(-time.Hour))},
			Spec: corev1.PodSpec{NodeName: "gpu-7"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		return p
	}
	objects := []runtime.Object{
		pod("bare", nil),
		pod("web-5d8c-abcde", &metav1.OwnerReference{Kind: "ReplicaSet", Name: "web-5d8c", Controller: &yes}),
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5d8c", Namespace: "ml",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "web", Controller: &yes}}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ml"}, Spec: appsv1.DeploymentSpec{Replicas: &two}},
		pod("db-0", &metav1.OwnerReference{Kind: "StatefulSet", Name: "db", Controller: &yes}),
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ml"}, Spec: appsv1.StatefulSetSpec{Replicas: &two}},
		pod("train-x7k2p", &metav1.OwnerReference{Kind: "Job", Name: "train", Controller: &yes}),
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml"}},
	}
	cases := []struct {
		mode, pod       string
		refuse          bool
		deleteAfter     int
		attempt         int
		wantErr         bool
		reconcileSecond bool
	}{
		{mode: "evict", pod: "bare"},
		{mode: "evict", pod: "bare", refuse: true, deleteAfter: 1, attempt: 2},
		{mode: "evict", pod: "bare", refuse: true, attempt: 1, wantErr: true},
		{mode: "delete", pod: "bare"},
		{mode: "scale_owner", pod: "web-5d8c-abcde", reconcileSecond: true},
		{mode: "scale_owner", pod: "db-0", reconcileSecond: true},
		{mode: "scale_owner", pod: "bare"},
	}
	calls := map[string]bool{}
	for _, c := range cases {
		client := fake.NewClientset(objects...)
		kubetest.ScaleSubresource(client)
		client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "eviction" {
				return false, nil, nil
			}
			if c.refuse {
				return true, nil, apierrors.NewTooManyRequests("disruption budget", 10)
			}
			return true, nil, nil
		})
		k := &kube.Reclaim{Core: client.CoreV1(), Apps: client.AppsV1(), Mode: c.mode, DeleteAfterRefusals: c.deleteAfter}
		attempt := c.attempt
		if attempt == 0 {
			attempt = 1
		}
		req := &action.Request{Step: action.StepReclaim, Attempt: attempt,
			Finding: finding.Finding{Pattern: schema.IdleSession, Namespace: "ml", Pod: c.pod, Job: "ml/" + c.pod,
				Scheduler: schema.SchedulerKubernetes, Hostname: "gpu-7", Start: rbacT0},
			Target: &target.Proof{Verdict: target.Proven, UID: "uid-" + c.pod}}
		ctx := context.Background()
		if _, _, err := k.Reconcile(ctx, req); err != nil {
			t.Fatalf("%s %s: reconcile: %v", c.mode, c.pod, err)
		}
		if _, err := k.Act(ctx, req); (err != nil) != c.wantErr {
			t.Fatalf("%s %s: act: %v", c.mode, c.pod, err)
		}
		if c.reconcileSecond { // after the scale-down: reads the owner's replicas
			if out, _, err := k.Reconcile(ctx, req); err != nil || out != action.Applied {
				t.Fatalf("%s %s: reconcile after act: %v %v", c.mode, c.pod, out, err)
			}
		}
		for _, a := range client.Actions() {
			res := a.GetResource().Resource
			if s := a.GetSubresource(); s != "" {
				res += "/" + s
			}
			calls[a.GetResource().Group+" "+res+" "+a.GetVerb()] = true
		}
	}
	// The policy's out_of_service cordons a node (only when enabled).
	if cordon {
		client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7"}})
		c := &kube.Cordon{Core: client.CoreV1()}
		req := &action.Request{Step: action.StepDrain, Finding: finding.Finding{Pattern: schema.GPUFault, Hostname: "gpu-7", Job: "ml/bare"}}
		if _, err := c.Act(context.Background(), req); err != nil {
			t.Fatalf("cordon: %v", err)
		}
		if out, _, err := c.Reconcile(context.Background(), req); err != nil || out != action.Applied {
			t.Fatalf("reconcile cordon: %v %v", out, err)
		}
		for _, a := range client.Actions() {
			calls[a.GetResource().Group+" "+a.GetResource().Resource+" "+a.GetVerb()] = true
		}
	}
	// The policy's facts: one list of pods and one of namespaces per cycle,
	// and one list per kind of controller the pods' owner chains need.
	client := fake.NewClientset(objects...)
	src := &kube.Facts{Core: client.CoreV1(), Apps: client.AppsV1(), Batch: client.BatchV1()}
	ids := []string{"ml/bare", "ml/web-5d8c-abcde", "ml/db-0", "ml/train-x7k2p"}
	if got, err := src.Lookup(context.Background(), ids); err != nil || len(got) != len(ids) || got["ml/train-x7k2p"] == nil ||
		got["ml/train-x7k2p"].Alloc.Kind != "batch" {
		t.Fatalf("facts lookup: %v %v", got, err)
	}
	for _, a := range client.Actions() {
		calls[a.GetResource().Group+" "+a.GetResource().Resource+" "+a.GetVerb()] = true
	}
	out := make([]string, 0, len(calls))
	for c := range calls {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// leaseCalls runs the analyzer's leader election on the fake clientset until
// it leads, then stops it (releasing the Lease), and returns its API calls.
func leaseCalls(t *testing.T) []string {
	t.Helper()
	client := fake.NewClientset()
	kl, err := kube.NewLease(kube.LeaseOptions{Coordination: client.CoordinationV1(), Namespace: "gpuwatch", Identity: "a",
		LeaseDuration: time.Second, RenewDeadline: 800 * time.Millisecond, RetryPeriod: 100 * time.Millisecond, ReleaseOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); kl.Run(ctx) }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ok, _ := kl.Lead(ctx, time.Now()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never led")
		}
	}
	time.Sleep(300 * time.Millisecond) // a renewal
	cancel()
	<-done
	calls := map[string]bool{}
	for _, a := range client.Actions() {
		calls[a.GetResource().Group+" "+a.GetResource().Resource+" "+a.GetVerb()] = true
	}
	out := make([]string, 0, len(calls))
	for c := range calls {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// TestRBACIsExactlyWhatTheActuatorUses: the analyzer's ClusterRole grants the
// calls the actuator makes and nothing more, in every overlay and in the Helm
// chart; chart values without Kubernetes actions grant nothing. When the
// actuator changes, this fails until the roles are reviewed.
func TestRBACIsExactlyWhatTheActuatorUses(t *testing.T) {
	want := actuatorCalls(t, false)
	if len(want) < 3 {
		t.Fatalf("the actuator made only %v: the exercise is broken", want)
	}
	lease := leaseCalls(t)
	check := func(t *testing.T, objs []Object, want []string) {
		t.Helper()
		var got, gotLease []string
		roles := 0
		for _, o := range objs {
			switch r := o.Typed.(type) {
			case *rbacv1.ClusterRole:
				roles++
				got = append(got, expand(t, r.Rules)...)
			case *rbacv1.Role:
				// Namespaced: only the leader election's Lease.
				roles++
				gotLease = append(gotLease, expand(t, r.Rules)...)
			}
		}
		sort.Strings(got)
		sort.Strings(gotLease)
		wantLease := lease
		if len(want) == 0 {
			wantLease = nil
		}
		if wantRoles := 2 * min(len(want), 1); roles != wantRoles || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotLease, wantLease) {
			t.Fatalf("%d roles granting\n%q and in the namespace %q\nthe analyzer calls\n%q and %q", roles, got, gotLease, want, wantLease)
		}
	}
	for _, dir := range append([]string{"base"}, overlays...) {
		t.Run(dir, func(t *testing.T) { check(t, renderDir(t, dir), want) })
	}
	t.Run("helm out_of_service enabled", func(t *testing.T) {
		vals := map[string]any{"analyzer": map[string]any{"policy": map[string]any{"out_of_service": map[string]any{"enabled": true}}}}
		check(t, helmTemplate(t, "gpuwatch", "gpuwatch", vals), actuatorCalls(t, true))
	})
	for _, file := range chartValues {
		t.Run("helm "+file, func(t *testing.T) {
			objs := helmTemplate(t, "gpuwatch", "gpuwatch", readValues(t, file))
			w := want
			if !acts(objs) {
				w = nil
			}
			check(t, objs, w)
		})
	}
}

// acts: the rendering runs an analyzer that reclaims pods through the API.
func acts(objs []Object) bool {
	for _, o := range objs {
		if d, ok := o.Typed.(*appsv1.Deployment); ok && contains(d.Spec.Template.Spec.Containers[0].Args, "--kubernetes.in-cluster") {
			return true
		}
	}
	return false
}

func expand(t *testing.T, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	var out []string
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule shape %+v", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("wildcard in rule %+v", r)
					}
					out = append(out, g+" "+res+" "+v)
				}
			}
		}
	}
	return out
}
