package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// These run the Kubernetes actuators against the real API server and
// controller-manager of test/kubernetes/start.sh, where the fake clientset's
// answers are replaced by the real ones: the Eviction API consulting a
// PodDisruptionBudget whose status the disruption controller keeps, the
// scale subresource, and the controllers that recreate what was evicted.

// reclaimReq is the reclaim the escalator makes of a finding on the pod's
// node since its creation, with the proof it makes from the API server's
// facts; a pod the API server no longer has gets none.
func reclaimReq(t *testing.T, cs kubernetes.Interface, ns, pod string, attempt int) *action.Request {
	t.Helper()
	req := &action.Request{Step: action.StepReclaim, Attempt: attempt,
		Finding: finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, Namespace: ns, Pod: pod, Job: ns + "/" + pod}}
	got, err := (&kube.Facts{Core: cs.CoreV1()}).Lookup(context.Background(), []string{ns + "/" + pod})
	if err != nil {
		t.Fatal(err)
	}
	if fa := got[ns+"/"+pod]; fa != nil {
		if len(fa.Identity.Nodes) > 0 {
			req.Finding.Hostname = fa.Identity.Nodes[0]
		}
		req.Finding.Start = fa.Identity.Since
		p := target.Prove(&req.Finding, fa, "")
		req.Target = &p
	}
	return req
}

// pdb creates a PodDisruptionBudget with minAvailable over pods labelled
// app=<app> and waits until the controller-manager has computed its status
// with want disruptions allowed.
func pdb(t *testing.T, cs kubernetes.Interface, ns, app string, minAvailable, healthy, want int32) {
	t.Helper()
	ctx := context.Background()
	ma := intstr.FromInt32(minAvailable)
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &ma, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 60*time.Second, "PDB "+app+" status from the controller-manager", func() (bool, error) {
		p, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := p.Status
		return s.ObservedGeneration == p.Generation && s.CurrentHealthy == healthy && s.DisruptionsAllowed == want, nil
	})
}

func gone(t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	testtool.Eventually(t, 60*time.Second, "pod "+ns+"/"+name+" gone", func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// TestRealEvictionUnderDisruptionBudget: a Running pod whose budget allows
// no disruption (minAvailable 1 of 1, status kept by the controller-manager)
// is not evicted: the API server answers 429 and the actuator says retry
// later, attempt after attempt, the pod untouched; only the configured
// delete after refusals removes it. With room in the budget the eviction
// goes through, and a Pending pod is evicted whatever its budget says.
func TestRealEvictionUnderDisruptionBudget(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, cs, nil)
	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: ns, Labels: map[string]string{"app": "train"}}})
	pdb(t, cs, ns, "train", 1, 1, 0)

	k := &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"}
	for attempt := 1; attempt <= 3; attempt++ {
		detail, err := k.Act(ctx, reclaimReq(t, cs, ns, "train-0", attempt))
		if !errors.Is(err, action.ErrRetryLater) || !strings.Contains(err.Error(), "disruption budget refused") {
			t.Fatalf("attempt %d: %q, %v; want a refusal to retry later", attempt, detail, err)
		}
		if out, _, err := k.Reconcile(ctx, reclaimReq(t, cs, ns, "train-0", attempt)); err != nil || out != action.NotApplied {
			t.Fatalf("attempt %d: reconcile says %v (%v), want not applied", attempt, out, err)
		}
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, "train-0", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("the refused pod was touched: %v %v", p, err)
	}

	// Deleting after 2 refusals: attempt 3 deletes, past the budget.
	k.DeleteAfterRefusals = 2
	if _, err := k.Act(ctx, reclaimReq(t, cs, ns, "train-0", 2)); !errors.Is(err, action.ErrRetryLater) {
		t.Fatalf("attempt 2 of 2: %v, want still refused", err)
	}
	detail, err := k.Act(ctx, reclaimReq(t, cs, ns, "train-0", 3))
	if err != nil || !strings.Contains(detail, "deleted after 2 refused evictions") {
		t.Fatalf("attempt 3: %q, %v; want deleted after 2 refusals", detail, err)
	}
	gone(t, cs, ns, "train-0")
	if out, _, err := k.Reconcile(ctx, reclaimReq(t, cs, ns, "train-0", 3)); err != nil || out != action.Applied {
		t.Fatalf("reconcile after delete: %v %v", out, err)
	}
	if _, err := k.Act(ctx, reclaimReq(t, cs, ns, "train-0", 4)); !errors.Is(err, action.ErrGone) {
		t.Fatalf("act on a deleted pod: %v, want ErrGone", err)
	}

	// Room in the budget (minAvailable 1 of 2): the eviction goes through.
	k.DeleteAfterRefusals = 0
	for _, n := range []string{"web-0", "web-1"} {
		testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns, Labels: map[string]string{"app": "web"}}})
	}
	pdb(t, cs, ns, "web", 1, 2, 1)
	if detail, err := k.Act(ctx, reclaimReq(t, cs, ns, "web-0", 1)); err != nil || detail != "evicted pod "+ns+"/web-0" {
		t.Fatalf("evict within the budget: %q %v", detail, err)
	}
	gone(t, cs, ns, "web-0")

	// A Pending pod (no node) runs nowhere: no GPU telemetry is its, so no
	// proof holds, and it is not evicted (though its budget would allow it:
	// the API server does not count a pod that is not running).
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "queued", Namespace: ns, Labels: map[string]string{"app": "queued"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/train:1"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb(t, cs, ns, "queued", 1, 0, 0)
	if detail, err := k.Act(ctx, reclaimReq(t, cs, ns, "queued", 1)); !errors.Is(err, action.ErrRefused) {
		t.Fatalf("evict a Pending pod: %q %v, want refused", detail, err)
	}
}

// TestRealScaleOwnerToZero: in scale_owner mode the owning Deployment
// (found through its ReplicaSet) and StatefulSet go to zero replicas
// through the scale subresource, and their pods go with them, none
// recreated. A bare pod has no owner to scale and is evicted. A Job has no
// scale subresource either: its pod is evicted and the job controller makes
// a new one, so reclaiming a Job's pod this way frees the GPU only briefly.
func TestRealScaleOwnerToZero(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, cs, nil)
	node := testkube.Nodes(t)[0]
	two := int32(2)
	tmpl := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/" + app + ":1"}}}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "serve"},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: sel("serve"), Template: tmpl("serve")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &two, ServiceName: "db", Selector: sel("db"), Template: tmpl("db")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "sweep"},
		Spec: batchv1.JobSpec{Template: func() corev1.PodTemplateSpec {
			p := tmpl("sweep")
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			return p
		}()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: ns}})
	running := func(app string, n int) []string {
		var names []string
		testtool.Eventually(t, 60*time.Second, fmt.Sprintf("%d Running pods of %s", n, app), func() (bool, error) {
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
			if err != nil {
				return false, err
			}
			names = names[:0]
			for _, p := range l.Items {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					names = append(names, p.Name)
				}
			}
			return len(names) == n && len(l.Items) == n, nil
		})
		return names
	}
	serve := running("serve", 2)
	running("db", 2)
	sweep := running("sweep", 1)

	k := &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "scale_owner"}
	for _, c := range []struct{ pod, want string }{
		{serve[0], "scaled deployment " + ns + "/serve from 2 to 0 replicas"},
		{"db-1", "scaled statefulset " + ns + "/db from 2 to 0 replicas"},
		{"bare", "evicted pod " + ns + "/bare"},
		{sweep[0], "evicted pod " + ns + "/" + sweep[0]},
	} {
		detail, err := k.Act(ctx, reclaimReq(t, cs, ns, c.pod, 1))
		if err != nil || detail != c.want {
			t.Errorf("%s: %q, %v; want %q", c.pod, detail, err, c.want)
		}
	}
	d, err := cs.AppsV1().Deployments(ns).Get(ctx, "serve", metav1.GetOptions{})
	if err != nil || *d.Spec.Replicas != 0 {
		t.Fatalf("deployment after scale: %v %v", d, err)
	}
	running("serve", 0)
	running("db", 0)
	gone(t, cs, ns, "bare")
	// The owners stay at zero: reconcile reads that back (the pods are gone too).
	for _, p := range []string{serve[0], "db-1", "bare"} {
		if out, why, err := k.Reconcile(ctx, reclaimReq(t, cs, ns, p, 1)); err != nil || out != action.Applied {
			t.Errorf("reconcile %s: %v %q %v, want applied", p, out, why, err)
		}
	}
	// The Job's evicted pod is replaced.
	again := running("sweep", 1)
	if again[0] == sweep[0] {
		t.Fatalf("the Job's pod %s is still there after its eviction", sweep[0])
	}
}

// TestRealCordon: the out_of_service cordon on a real node marks it
// unschedulable with its reason, a second cordon is refused as already
// done (an operator's cordon is not taken over), reconcile reads it back,
// and an uncordoned node reconciles as not applied.
func TestRealCordon(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, cs, nil) // names the node, and makes it this test's
	node := "cordon-" + ns[strings.LastIndex(ns, "-")+1:]
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	c := &kube.Cordon{Core: cs.CoreV1()}
	req := &action.Request{Step: action.StepDrain, Finding: finding.Finding{Pattern: schema.GPUFault, Hostname: node, Job: ns + "/train"}}
	if out, _, err := c.Reconcile(ctx, req); err != nil || out != action.NotApplied {
		t.Fatalf("reconcile before: %v %v, want not applied", out, err)
	}
	// The controller-manager annotates a new node at once (its TTL), which
	// moves the resourceVersion under the cordon's patch: the cordon reads
	// the node again and goes through on the first call, as it must while a
	// kubelet writes the node's status.
	detail, err := c.Act(ctx, req)
	if err != nil || !strings.HasPrefix(detail, "cordoned node "+node) {
		t.Fatalf("cordon: %q %v", detail, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable || n.Annotations[kube.CordonReasonAnnotation] == "" {
		t.Fatalf("node after the cordon: unschedulable %v, annotations %v, %v", n.Spec.Unschedulable, n.Annotations, err)
	}
	if _, err := c.Act(ctx, req); !errors.Is(err, action.ErrAlready) {
		t.Fatalf("second cordon: %v, want ErrAlready", err)
	}
	if out, _, err := c.Reconcile(ctx, req); err != nil || out != action.Applied {
		t.Fatalf("reconcile after: %v %v, want applied", out, err)
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Act(ctx, req); !errors.Is(err, action.ErrGone) {
		t.Fatalf("cordon of a deleted node: %v, want ErrGone", err)
	}
}
