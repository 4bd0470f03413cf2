package action

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

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
