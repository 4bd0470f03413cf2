package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The Kubernetes twin of TestFaultingNodeDrainedOnRealSlurm: pods on a
// real Node of the real API server, the simulator's XIDs reaching the
// engine as gpu_fault and app_xid findings, and the cordon taking the node
// out. In dry run it only records and the node stays schedulable; for real
// it cordons once; the operator's uncordon is not fought; two new hardware
// faults cordon it again. The application's XID 13 never counts.
func TestFaultingNodeCordonedOnRealControlPlane(t *testing.T) {
	t.Parallel()
	admin := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, admin, nil)
	node := "faulting-" + ns[strings.LastIndex(ns, "-")+1:]
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	uncordon := func() {
		patch := []byte(`{"spec":{"unschedulable":false}}`)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("uncordon %s: %v", node, err)
		}
	}
	scenario := fmt.Sprintf(`
name: faulting-node
fleet:
  - {hostname: %[1]s, model: H100-SXM5-80GB, gpus: 8}
workloads:
  - {id: train-a, scheduler: kubernetes, namespace: %[2]s, user: ann, team: dev-a, node: %[1]s, gpus: [0, 1], start: 0s, duration: 5h, behaviour: training}
  - {id: train-b, scheduler: kubernetes, namespace: %[2]s, user: ben, team: dev-a, node: %[1]s, gpus: [2], start: 0s, duration: 5h, behaviour: training}
  - {id: train-c, scheduler: kubernetes, namespace: %[2]s, user: cat, team: dev-a, node: %[1]s, gpus: [3], start: 0s, duration: 5h, behaviour: training}
  - {id: train-d, scheduler: kubernetes, namespace: %[2]s, user: dan, team: dev-a, node: %[1]s, gpus: [4], start: 0s, duration: 5h, behaviour: training}
  - {id: train-e, scheduler: kubernetes, namespace: %[2]s, user: eve, team: dev-a, node: %[1]s, gpus: [5], start: 0s, duration: 5h, behaviour: training}
`+faultingNodeFaults, node, ns)
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r, d := engineRigFor(t, scenario, origin, 0, 0)
	taken, got := outOfServiceRun(t, r, d, origin, schema.SchedulerKubernetes, &kube.Cordon{Core: admin.CoreV1()}, func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node, err)
		}
		if !n.Spec.Unschedulable {
			return false
		}
		if reason := n.Annotations[kube.CordonReasonAnnotation]; !strings.Contains(reason, "gpuwatch: GPU ") {
			t.Errorf("cordon reason %q", reason)
		}
		// The operator looks at the GPU and puts the node back.
		uncordon()
		return true
	}, "cordoned node "+node)
	// As on Slurm: XID 48 and XID 94 are two hardware faults by 1h40m
	// (dry run, recorded once); live at 2h they cordon the node once; the
	// uncordon stands until XID 79 and XID 95 come. XID 13 counts never.
	want := []string{
		"1h40m0s:intended:" + ns + "/train-c", "1h40m0s:dry_run:" + ns + "/train-c",
		"2h0m0s:intended:" + ns + "/train-c", "2h0m0s:done:" + ns + "/train-c",
		"3h50m0s:intended:" + ns + "/train-e", "3h50m0s:done:" + ns + "/train-e"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("cordon audit:\n got %v\nwant %v", got, want)
	}
	if len(taken) != 2 || !taken[2*time.Hour] || !taken[3*time.Hour+50*time.Minute] {
		t.Errorf("node cordoned after the cycles at %v, want +2h and +3h50m", taken)
	}
}

// TestSharedGPUFaultOnRealControlPlane: the case on a real Node of
// the real API server. XID 79 on a GPU time-sliced between three pods
// gives each pod a gpu_fault finding but is one fault: with
// out_of_service.faults 2 the node stays schedulable, in the dry run and
// live; XID 48 on another of its GPUs cordons it, once.
func TestSharedGPUFaultOnRealControlPlane(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("replays 5.5 simulated hours")
	}
	admin := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, admin, nil)
	node := "shared-" + ns[strings.LastIndex(ns, "-")+1:]
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	cordoned := func() bool {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node, err)
		}
		if !n.Spec.Unschedulable {
			return false
		}
		if reason := n.Annotations[kube.CordonReasonAnnotation]; !strings.Contains(reason, "XID 48") || !strings.Contains(reason, "2 faults on this node") {
			t.Errorf("cordon reason %q, want XID 48 and 2 faults", reason)
		}
		// The operator looks at the GPU and puts the node back.
		patch := []byte(`{"spec":{"unschedulable":false}}`)
		if _, err := admin.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Errorf("uncordon %s: %v", node, err)
		}
		return true
	}
	sharedGPURun(t, node, ns, &kube.Cordon{Core: admin.CoreV1()}, cordoned)
}
