package action

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/schema"
)

// StepDrain takes a node out of service after its GPUs faulted.
const StepDrain = string(schema.ActionDrain)

// ErrAlready: the target already shows the step's effect (a node drained
// or cordoned by an operator or an earlier step): skipped, not repeated.
var ErrAlready = errors.New("already in that state")

// Names of the actuators that take nodes out of service.
const (
	SlurmDrainName       = "slurm_drain"
	KubernetesCordonName = "kubernetes_cordon"
)

// OutOfServiceReason is the one-line reason a node is taken out with,
// from the fault finding that triggered it: the GPU, what failed and in
// which job, and how an operator puts the node back.
func OutOfServiceReason(req *Request, undo string) string {
	f := &req.Finding
	what := "hardware fault"
	switch {
	case f.Evidence["xid"] > 0:
		x := health.XID(int(f.Evidence["xid"]))
		what = fmt.Sprintf("XID %d (%s)", x.Code, x.Meaning)
	case f.Evidence["row_remap_failure"] > 0:
		what = "row remapping failed"
	case f.Evidence["ecc_dbe"] > 0:
		what = "uncorrectable ECC error"
	}
	n := int(f.Evidence["faults"])
	r := fmt.Sprintf("gpuwatch: GPU %s %s in job %s", f.GPU, what, f.Job)
	if n > 1 {
		r += fmt.Sprintf(", %d faults on this node", n)
	}
	r += "; " + undo + " when fixed"
	// One printable line of bounded length whatever the finding holds.
	r = strings.Map(func(c rune) rune {
		if !unicode.IsPrint(c) {
			return ' '
		}
		return c
	}, r)
	if len(r) > slurm.MaxReasonBytes {
		r = r[:slurm.MaxReasonBytes]
	}
	return r
}

// SlurmDrain drains the fault finding's node (scontrol update
// State=DRAIN): running jobs finish, no new one starts there. The node's
// state is read before and after through the Slurm adapter (sinfo --json).
type SlurmDrain struct {
	Runner   execrun.Runner
	Scontrol string // default "scontrol"
	Sinfo    string // default "sinfo"
}

// Name implements Actuator.
func (s *SlurmDrain) Name() string { return SlurmDrainName }

func (s *SlurmDrain) client() *slurm.Client {
	return &slurm.Client{Runner: s.Runner, Scontrol: s.Scontrol, Sinfo: s.Sinfo}
}

func (s *SlurmDrain) node(ctx context.Context, req *Request) (*slurm.Node, error) {
	host := req.Finding.Hostname
	if !slurm.ValidNodeName(host) {
		return nil, fmt.Errorf("slurm node %q: %w", host, ErrInvalid)
	}
	n, err := s.client().Node(ctx, host)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("slurm has no node %s: %w", host, ErrGone)
	}
	return n, nil
}

// Act implements Actuator for drain steps.
func (s *SlurmDrain) Act(ctx context.Context, req *Request) (string, error) {
	if req.Step != StepDrain {
		return "", fmt.Errorf("slurm drain %s: %w", req.Step, ErrUnsupported)
	}
	before, err := s.node(ctx, req)
	if err != nil {
		return "", err
	}
	if before.Drained() {
		return "", fmt.Errorf("node %s is already %s (%s): %w", before.Name, nodeWords(before), before.Reason, ErrAlready)
	}
	reason := OutOfServiceReason(req, "scontrol update NodeName="+before.Name+" State=RESUME")
	if err := s.client().Drain(ctx, before.Name, reason); err != nil {
		return "", err
	}
	after, err := s.node(ctx, req)
	if err != nil {
		return "", fmt.Errorf("after draining node %s: %w", before.Name, err)
	}
	if !after.Drained() {
		return "", fmt.Errorf("node %s still %s after scontrol update State=DRAIN", before.Name, nodeWords(after))
	}
	return fmt.Sprintf("drained node %s (was %s, now %s): %s", before.Name, nodeWords(before), nodeWords(after), reason), nil
}

// Reconcile implements Reconciler: a drain took effect when the node is
// drained, draining or down.
func (s *SlurmDrain) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	n, err := s.node(ctx, req)
	if errors.Is(err, ErrGone) {
		return Applied, "slurm no longer has the node", nil
	}
	if err != nil {
		return 0, "", err
	}
	if n.Drained() {
		return Applied, "node " + n.Name + " is " + nodeWords(n), nil
	}
	return NotApplied, "node " + n.Name + " is " + nodeWords(n), nil
}

func nodeWords(n *slurm.Node) string {
	if len(n.Flags) == 0 {
		return n.State
	}
	return n.State + "+" + strings.Join(n.Flags, "+")
}
