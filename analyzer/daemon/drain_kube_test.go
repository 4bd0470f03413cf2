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

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
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
faults:
  - {kind: xid, node: %[1]s, gpus: [2], at: 30m, xid: 13}
  - {kind: xid, node: %[1]s, gpus: [1], at: 60m, xid: 48}
  - {kind: xid, node: %[1]s, gpus: [3], at: 100m, xid: 94}
  - {kind: xid, node: %[1]s, gpus: [4], at: 200m, xid: 79}
  - {kind: xid, node: %[1]s, gpus: [5], at: 230m, xid: 95}
`, node, ns)
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r, d := engineRigFor(t, scenario, origin, 0, 0)
	polDoc := func(dry bool) *policy.Policy {
		p, err := policy.Parse([]byte(fmt.Sprintf("dry_run: true\nout_of_service: {enabled: true, dry_run: %v}\ntiers: [{name: all}]\n", dry)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	cordon := &kube.Cordon{Core: admin.CoreV1()}
	r.esc.Policy = polDoc(true)
	r.esc.Actuators[cordon.Name()] = cordon
	d.Drainer = &Drainer{Policy: r.esc.Policy, Log: r.log, History: r.st, Actuators: map[string]action.Actuator{schema.SchedulerKubernetes: cordon}}
	cordoned := map[time.Duration]bool{}
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5 * time.Hour)); now = now.Add(5 * time.Minute) {
		at := now.Sub(origin)
		if at == 2*time.Hour {
			// The policy goes live: dry-run records do not stand for real cordons.
			d.Drainer.Policy, r.esc.Policy = polDoc(false), polDoc(false)
		}
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatalf("cycle at +%s: %v", at, err)
		}
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node, err)
		}
		if n.Spec.Unschedulable {
			cordoned[at] = true
			if reason := n.Annotations[kube.CordonReasonAnnotation]; !strings.Contains(reason, "gpuwatch: GPU ") {
				t.Errorf("cordon reason %q", reason)
			}
			// The operator looks at the GPU and puts the node back.
			uncordon()
		}
	}
	evs, err := r.log.Events(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.Step == action.StepDrain {
			got = append(got, fmt.Sprintf("%s:%s:%s", e.At.Sub(origin), e.State, e.Job))
			if e.State == audit.Done && (!strings.Contains(e.Detail, "2 hardware faults") || !strings.Contains(e.Detail, "cordoned node "+node)) {
				t.Errorf("done cordon's detail %q", e.Detail)
			}
		}
	}
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
	if testing.Verbose() {
		for _, e := range evs {
			t.Logf("%s %s %s %s %s", e.At.Sub(origin), e.Step, e.State, e.Job, e.Detail)
		}
	}
	if len(cordoned) != 2 || !cordoned[2*time.Hour] || !cordoned[3*time.Hour+50*time.Minute] {
		t.Errorf("node cordoned after the cycles at %v, want +2h and +3h50m", cordoned)
	}
}
