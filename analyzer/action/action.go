// Package action holds the actuators that carry out escalation steps and
// what every actuator shares (the Actuator interface, its errors and
// outcomes): Slurm (scancel), JupyterHub (the Hub's REST API), local
// orphaned processes (SIGTERM then SIGKILL, start time checked), and the
// notification channels (webhook, Alertmanager, email). The Kubernetes
// actuators (Eviction API, owner scale-down, delete; node cordon) are in
// the Kubernetes adapter, analyzer/kube. Actuators only act; the daemon
// decides, rate-limits and audits.
package action

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Step names (policy.StepAction values; repeated here so that actuators do
// not depend on the policy file format).
const (
	StepNotify     = string(schema.ActionNotify)
	StepWarn       = string(schema.ActionWarn)
	StepCheckpoint = string(schema.ActionCheckpoint)
	StepReclaim    = string(schema.ActionReclaim)
)

// Request is one step to carry out on one finding's allocation.
type Request struct {
	Step    string          `json:"step"`
	Finding finding.Finding `json:"finding"`
	Tier    string          `json:"tier"`
	Signal  string          `json:"signal,omitempty"`
	// Attempt counts tries of this step (1 for the first); Kubernetes
	// deletes after enough refused evictions.
	Attempt int `json:"attempt"`
	// Deadline is when the next step (if any) is due, for messages.
	NextStep   string    `json:"next_step,omitempty"`
	NextStepAt time.Time `json:"next_step_at,omitzero"`
	DryRun     bool      `json:"dry_run"`
	// Target is the proof, made at decision time, that the job or pod is
	// the workload the evidence came from; the actuators check it again on
	// what they read before they act, and refuse a step without one.
	Target *target.Proof `json:"target,omitempty"`
}

// Actuator carries out steps. Act returns a short detail for the audit log.
type Actuator interface {
	Name() string
	Act(ctx context.Context, req *Request) (string, error)
}

// Outcome of reconciling an interrupted step with its target.
type Outcome int

const (
	// Applied: the target shows the step's effect (the job is gone or
	// cancelled, the pod is gone); the step must not be repeated.
	Applied Outcome = iota
	// NotApplied: the target is unchanged; the step may run again.
	NotApplied
	// Unknowable: the effect cannot be observed (a signal); the step is
	// not repeated.
	Unknowable
)

func (o Outcome) String() string {
	return [...]string{"applied", "not applied", "unknowable"}[o]
}

// Reconciler is an actuator that can tell, after a crash, whether an
// interrupted step took effect.
type Reconciler interface {
	Reconcile(ctx context.Context, req *Request) (Outcome, string, error)
}

var (
	// ErrGone: the target no longer runs, so the step is moot (skipped).
	ErrGone = errors.New("target is no longer running")
	// ErrUnsupported: this actuator cannot do this step for this target (skipped).
	ErrUnsupported = errors.New("not supported for this target")
	// ErrRetryLater: refused for now (a PodDisruptionBudget); a later cycle retries.
	ErrRetryLater = errors.New("refused for now, retry later")
	// ErrInvalid: the request names a target that fails validation (skipped, never run).
	ErrInvalid = errors.New("invalid target")
	// ErrRefused: the target's own host found no ground for the step (a
	// process that is gone, reused, holds no GPU memory or belongs to a
	// live job): skipped, and the audit says why.
	ErrRefused = errors.New("refused by the local check")
)

// Moot reports whether an actuator's error means the step is skipped, not
// failed: the target is gone or already so, the step does not apply to it,
// it failed validation, or its host refused it.
func Moot(err error) bool {
	return errors.Is(err, ErrGone) || errors.Is(err, ErrAlready) || errors.Is(err, ErrUnsupported) ||
		errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused)
}

// Summary is a one-line description of the finding for messages.
func Summary(req *Request) string {
	f := &req.Finding
	who := f.User
	if f.Team != "" {
		who += " (" + f.Team + ")"
	}
	return fmt.Sprintf("job %s of %s on %s: %s, %.1f GPU-hours wasted", f.Job, who, f.Hostname,
		strings.ReplaceAll(string(f.Pattern), "_", " "), f.WastedGPUHours)
}

// Description is a paragraph for people: what was found and what comes next.
func Description(req *Request) string {
	var b strings.Builder
	b.WriteString(Summary(req))
	b.WriteString(".")
	if req.Finding.Advice != "" {
		b.WriteString(" " + req.Finding.Advice)
	}
	if req.NextStep != "" {
		fmt.Fprintf(&b, " Next step: %s at %s.", req.NextStep, req.NextStepAt.UTC().Format(time.RFC3339))
	}
	if req.DryRun {
		b.WriteString(" (dry-run: nothing will be done to the job)")
	}
	return b.String()
}

// userName is what may become the local part of an address.
var userName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
