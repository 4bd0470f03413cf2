package action

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// recordedNode answers sinfo --json with what Slurm 22.05 printed for
// its one node "vm" before and after scontrol update State=DRAIN.
type recordedNode struct {
	drained bool
	calls   []string
}

func (r *recordedNode) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, name+" "+strings.Join(args, " "))
	switch name {
	case "sinfo":
		if r.drained {
			return os.ReadFile("../slurm/testdata/sinfo-22.05-drained.json")
		}
		return os.ReadFile("../slurm/testdata/sinfo-22.05-idle.json")
	case "scontrol":
		r.drained = true
		return nil, nil
	}
	return nil, errors.New(name + ": not found")
}

func drainReq(host string) *Request {
	return &Request{Step: StepDrain, Finding: finding.Finding{Pattern: schema.GPUFault, Hostname: host, Job: "5003",
		GPU: "GPU-6a1c", Evidence: map[string]float64{"xid": 79, "faults": 2}}}
}

func TestSlurmDrain(t *testing.T) {
	ctx := context.Background()
	r := &recordedNode{}
	s := &SlurmDrain{Runner: r}
	if out, _, err := s.Reconcile(ctx, drainReq("vm")); err != nil || out != NotApplied {
		t.Fatalf("reconcile before: %v %v", out, err)
	}
	detail, err := s.Act(ctx, drainReq("vm"))
	if err != nil || !strings.Contains(detail, "drained node vm (was IDLE, now IDLE+DRAIN)") {
		t.Fatalf("drain: %q %v", detail, err)
	}
	want := "scontrol update NodeName=vm State=DRAIN Reason=gpuwatch: GPU GPU-6a1c XID 79 (GPU has fallen off the bus) in job 5003, 2 faults on this node; scontrol update NodeName=vm State=RESUME when fixed"
	if !strings.Contains(strings.Join(r.calls, "\n"), want) {
		t.Errorf("commands %q, want %q", r.calls, want)
	}
	if out, _, err := s.Reconcile(ctx, drainReq("vm")); err != nil || out != Applied {
		t.Errorf("reconcile after: %v %v", out, err)
	}
	// Drained already (by an operator or an earlier step): skipped.
	if _, err := s.Act(ctx, drainReq("vm")); !errors.Is(err, ErrAlready) || !Moot(err) {
		t.Errorf("second drain: %v", err)
	}
	if _, err := s.Act(ctx, drainReq("gpu-other")); !errors.Is(err, ErrGone) {
		t.Errorf("a node Slurm does not have: %v", err)
	}
	n := len(r.calls)
	for _, host := range []string{"", "vm,gpu-other", "gpu[1-4]", "-x"} {
		if _, err := s.Act(ctx, drainReq(host)); !errors.Is(err, ErrInvalid) {
			t.Errorf("host %q: %v", host, err)
		}
	}
	if len(r.calls) != n {
		t.Errorf("invalid hosts ran commands: %q", r.calls[n:])
	}
	if _, err := s.Act(ctx, &Request{Step: StepReclaim, Finding: drainReq("vm").Finding}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("reclaim through the drain actuator: %v", err)
	}
}

func TestKubernetesCordon(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-7"}})
	k := &KubernetesCordon{Core: cs.CoreV1()}
	if out, _, err := k.Reconcile(ctx, drainReq("gpu-7")); err != nil || out != NotApplied {
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
	if out, _, err := k.Reconcile(ctx, drainReq("gpu-7")); err != nil || out != Applied {
		t.Errorf("reconcile after: %v %v", out, err)
	}
	if _, err := k.Act(ctx, drainReq("gpu-7")); !errors.Is(err, ErrAlready) {
		t.Errorf("second cordon: %v", err)
	}
	if _, err := k.Act(ctx, drainReq("gpu-8")); !errors.Is(err, ErrGone) {
		t.Errorf("missing node: %v", err)
	}
	if _, err := k.Act(ctx, drainReq("Bad_Name")); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid name: %v", err)
	}
}
