package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

func drainReq(host string) *action.Request {
	return &action.Request{Step: action.StepDrain, Finding: finding.Finding{Pattern: schema.GPUFault, Hostname: host, Job: "5003",
		GPU: "GPU-6a1c", Evidence: map[string]float64{"xid": 79, "faults": 2}}}
}

func TestCordon(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7"}})
	k := &Cordon{Core: cs.CoreV1()}
	if out, _, err := k.Reconcile(ctx, drainReq("gpu-7")); err != nil || out != action.NotApplied {
		t.Fatalf("reconcile before: %v %v", out, err)
	}
	detail, err := k.Act(ctx, drainReq("gpu-7"))
	if err != nil || !strings.Contains(detail, "cordoned node gpu-7") || !strings.Contains(detail, "kubectl uncordon gpu-7") {
		t.Fatalf("cordon: %q %v", detail, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-7", metav1.GetOptions{})
	if err != nil || !n.Spec.Unschedulable || !strings.Contains(n.Annotations[CordonReasonAnnotation], "XID 79") {
		t.Fatalf("node after: %+v %v", n, err)
	}
	if out, _, err := k.Reconcile(ctx, drainReq("gpu-7")); err != nil || out != action.Applied {
		t.Errorf("reconcile after: %v %v", out, err)
	}
	if _, err := k.Act(ctx, drainReq("gpu-7")); !errors.Is(err, action.ErrAlready) {
		t.Errorf("second cordon: %v", err)
	}
	if _, err := k.Act(ctx, drainReq("gpu-8")); !errors.Is(err, action.ErrGone) {
		t.Errorf("missing node: %v", err)
	}
	if _, err := k.Act(ctx, drainReq("Bad_Name")); !errors.Is(err, action.ErrInvalid) {
		t.Errorf("invalid name: %v", err)
	}
}

// TestCordonRereadsOnConflict: a kubelet's status write between
// the read and the patch is read again and the cordon goes through; an
// operator's cordon in that gap is seen and left as it is; a conflict that
// never ends is retried by the next cycle.
func TestCordonRereadsOnConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		conflicts int
		operator  bool // an operator cordons the node with the first conflict
		want      error
	}{
		{name: "heartbeat", conflicts: 1},
		{name: "operator cordoned meanwhile", conflicts: 1, operator: true, want: action.ErrAlready},
		{name: "endless", conflicts: 1000, want: action.ErrRetryLater},
	} {
		cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7"}})
		left := tc.conflicts
		cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if left == 0 {
				return false, nil, nil
			}
			if left == tc.conflicts && tc.operator {
				n, _ := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("nodes"), "", "gpu-7")
				n.(*corev1.Node).Spec.Unschedulable = true
				if err := cs.Tracker().Update(corev1.SchemeGroupVersion.WithResource("nodes"), n, ""); err != nil {
					t.Fatal(err)
				}
			}
			left--
			return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), "gpu-7", errors.New("the object has been modified"))
		})
		k := &Cordon{Core: cs.CoreV1()}
		detail, err := k.Act(ctx, drainReq("gpu-7"))
		n, _ := cs.CoreV1().Nodes().Get(ctx, "gpu-7", metav1.GetOptions{})
		if tc.want != nil {
			if !errors.Is(err, tc.want) {
				t.Errorf("%s: %q %v, want %v", tc.name, detail, err, tc.want)
			}
			if tc.operator && n.Annotations[CordonReasonAnnotation] != "" {
				t.Errorf("%s: the operator's cordon was overwritten with gpuwatch's reason", tc.name)
			}
			continue
		}
		if err != nil || !n.Spec.Unschedulable || n.Annotations[CordonReasonAnnotation] == "" {
			t.Errorf("%s: %q %v, node %+v; want cordoned", tc.name, detail, err, n.Spec)
		}
	}
}
