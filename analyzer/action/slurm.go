package action

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Slurm signals and cancels batch jobs with scancel, checking the job's
// state before and after through the Slurm adapter (squeue --json, then
// accounting's sacct --json for jobs the controller no longer keeps).
type Slurm struct {
	Runner  execrun.Runner
	Scancel string // default "scancel"
	Squeue  string // default "squeue"
	Sacct   string // default "sacct"
	// Cluster is the local Slurm's name (--slurm.cluster), "" if not given.
	Cluster string
}

// Name implements Actuator.
func (s *Slurm) Name() string { return schema.SchedulerSlurm }

func (s *Slurm) client() *slurm.Client {
	return &slurm.Client{Runner: s.Runner, Scancel: s.Scancel, Squeue: s.Squeue, Sacct: s.Sacct}
}

// ValidJobID reports whether id is a Slurm job id (array tasks included).
func ValidJobID(id string) bool { return slurm.ValidJobID(id) }

// JobState returns the job's state, or "" when Slurm no longer knows it.
func (s *Slurm) JobState(ctx context.Context, id string) (string, error) {
	if !ValidJobID(id) {
		return "", fmt.Errorf("slurm job %q: %w", id, ErrInvalid)
	}
	return s.client().State(ctx, id)
}

// Active reports whether the job still holds or will hold resources.
func (s *Slurm) Active(ctx context.Context, id string) (bool, error) {
	st, err := s.JobState(ctx, id)
	return slurm.Active(st), err
}

// Act implements Actuator for checkpoint and reclaim steps.
func (s *Slurm) Act(ctx context.Context, req *Request) (string, error) {
	id := req.Finding.Job
	if !ValidJobID(id) {
		return "", fmt.Errorf("slurm job %q: %w", id, ErrInvalid)
	}
	c := s.client()
	j, err := c.Job(ctx, id)
	if err != nil {
		return "", err
	}
	before := ""
	if j != nil {
		before = j.State
	}
	if slurm.Active(before) {
		// Right before scancel, the job is still the evidence's workload.
		if err := s.proven(req, j); err != nil {
			return "", err
		}
	}
	switch req.Step {
	case StepCheckpoint:
		sig := orDefault(req.Signal, "USR1")
		if before != "RUNNING" {
			return "", fmt.Errorf("job %s is %s: %w", id, stateWord(before), ErrGone)
		}
		if err := c.Signal(ctx, id, sig); err != nil {
			if errors.Is(err, slurm.ErrInvalid) {
				return "", fmt.Errorf("signal %q: %w", req.Signal, ErrInvalid)
			}
			return "", err
		}
		after, err := s.JobState(ctx, id)
		if err != nil {
			return "", fmt.Errorf("after signalling job %s: %w", id, err)
		}
		return fmt.Sprintf("sent SIG%s to job %s (state %s, now %s)", trimSIG(sig), id, before, stateWord(after)), nil
	case StepReclaim:
		if !slurm.Active(before) {
			return "", fmt.Errorf("job %s is %s: %w", id, stateWord(before), ErrGone)
		}
		if err := c.Cancel(ctx, id); err != nil {
			return "", err
		}
		after, err := s.JobState(ctx, id)
		if err != nil {
			return "", fmt.Errorf("after cancelling job %s: %w", id, err)
		}
		if slurm.Active(after) {
			return "", fmt.Errorf("job %s still %s after scancel", id, after)
		}
		return fmt.Sprintf("cancelled job %s (state %s, now %s)", id, before, stateWord(after)), nil
	}
	return "", fmt.Errorf("slurm %s: %w", req.Step, ErrUnsupported)
}

func trimSIG(s string) string {
	if len(s) > 3 && s[:3] == "SIG" {
		return s[3:]
	}
	return s
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// proven checks, on the job as Slurm reports it now, the proof the step was
// decided on: a step without one, or a job that is now another workload
// under the id (other nodes, a later start, another cluster), is refused.
func (s *Slurm) proven(req *Request, j *slurm.Job) error {
	if req.Target == nil || !req.Target.OK() {
		return fmt.Errorf("job %s: no proof that it is the workload the evidence came from: %w", j.ID, ErrRefused)
	}
	fa := &facts.Facts{Scheduler: schema.SchedulerSlurm, State: j.State, Identity: facts.SlurmIdentity(j)}
	if p := target.Prove(&req.Finding, fa, s.Cluster); !p.OK() {
		return fmt.Errorf("job %s as Slurm reports it before %s: %s: %w", j.ID, req.Step, p.Why, ErrRefused)
	}
	return nil
}

// Reconcile implements Reconciler: a cancel took effect when the job is no
// longer active; a signal cannot be observed afterwards.
func (s *Slurm) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	if req.Step != StepReclaim {
		return Unknowable, "a signal leaves no trace to check", nil
	}
	st, err := s.JobState(ctx, req.Finding.Job)
	if err != nil {
		return 0, "", err
	}
	if slurm.Active(st) {
		return NotApplied, "job " + req.Finding.Job + " still " + st, nil
	}
	return Applied, "job " + req.Finding.Job + " is " + stateWord(st), nil
}

func stateWord(st string) string {
	if st == "" {
		return "gone"
	}
	return st
}
