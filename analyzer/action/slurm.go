package action

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"context"
	"fmt"
	"regexp"
	"strings"
)

// Slurm signals and cancels batch jobs with scancel, checking the job's
// state with squeue (and scontrol for jobs squeue no longer lists) before
// and after. There is no accounting daemon assumption: no sacct.
type Slurm struct {
	Runner   Runner
	Scancel  string // default "scancel"
	Squeue   string // default "squeue"
	Scontrol string // default "scontrol"
}

// Name implements Actuator.
func (s *Slurm) Name() string { return schema.SchedulerSlurm }

var (
	slurmJobID = regexp.MustCompile(`^[0-9]{1,12}(_[0-9]{1,12})?$`)
	slurmState = regexp.MustCompile(`^[A-Z_]{1,32}$`)
	signalName = regexp.MustCompile(`^(USR1|USR2|TERM|INT|HUP|QUIT|CONT|STOP|ALRM|KILL|URG|XCPU)$`)
)

// ValidJobID reports whether id is a Slurm job id (array tasks included).
func ValidJobID(id string) bool { return slurmJobID.MatchString(id) }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// active states: the job holds or will hold resources.
var active = map[string]bool{"RUNNING": true, "PENDING": true, "SUSPENDED": true, "CONFIGURING": true,
	"REQUEUED": true, "REQUEUE_HOLD": true, "RESIZING": true, "SIGNALING": true, "STAGE_OUT": false}

// JobState returns the job's state, or "" when Slurm no longer knows it.
func (s *Slurm) JobState(ctx context.Context, id string) (string, error) {
	if !ValidJobID(id) {
		return "", fmt.Errorf("slurm job %q: %w", id, ErrInvalid)
	}
	out, err := s.Runner.Run(ctx, orDefault(s.Squeue, "squeue"), "--noheader", "--jobs="+id, "--format=%T")
	if err == nil {
		if st := strings.TrimSpace(string(out)); st != "" {
			line := strings.SplitN(st, "\n", 2)[0]
			if !slurmState.MatchString(line) {
				return "", fmt.Errorf("squeue job %s: unexpected state %q", id, line)
			}
			return line, nil
		}
	} else if !strings.Contains(err.Error(), "Invalid job id") {
		return "", fmt.Errorf("squeue job %s: %w", id, err)
	}
	// squeue forgets finished jobs quickly; scontrol keeps them for MinJobAge.
	out, err = s.Runner.Run(ctx, orDefault(s.Scontrol, "scontrol"), "--oneliner", "show", "job", id)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return "", nil
		}
		return "", fmt.Errorf("scontrol show job %s: %w", id, err)
	}
	for _, field := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(field, "JobState="); ok {
			if !slurmState.MatchString(v) {
				return "", fmt.Errorf("scontrol job %s: unexpected state %q", id, v)
			}
			return v, nil
		}
	}
	return "", nil
}

// Active reports whether the job still holds or will hold resources.
func (s *Slurm) Active(ctx context.Context, id string) (bool, error) {
	st, err := s.JobState(ctx, id)
	return active[st], err
}

// Act implements Actuator for checkpoint and reclaim steps.
func (s *Slurm) Act(ctx context.Context, req *Request) (string, error) {
	id := req.Finding.Job
	if !ValidJobID(id) {
		return "", fmt.Errorf("slurm job %q: %w", id, ErrInvalid)
	}
	before, err := s.JobState(ctx, id)
	if err != nil {
		return "", err
	}
	switch req.Step {
	case StepCheckpoint:
		sig := strings.TrimPrefix(orDefault(req.Signal, "USR1"), "SIG")
		if !signalName.MatchString(sig) {
			return "", fmt.Errorf("signal %q: %w", req.Signal, ErrInvalid)
		}
		if before != "RUNNING" {
			return "", fmt.Errorf("job %s is %s: %w", id, stateWord(before), ErrGone)
		}
		if _, err := s.Runner.Run(ctx, orDefault(s.Scancel, "scancel"), "--signal="+sig, "--full", id); err != nil {
			return "", fmt.Errorf("signal job %s: %w", id, err)
		}
		after, err := s.JobState(ctx, id)
		if err != nil {
			return "", fmt.Errorf("after signalling job %s: %w", id, err)
		}
		return fmt.Sprintf("sent SIG%s to job %s (state %s, now %s)", sig, id, before, stateWord(after)), nil
	case StepReclaim:
		if !active[before] {
			return "", fmt.Errorf("job %s is %s: %w", id, stateWord(before), ErrGone)
		}
		if _, err := s.Runner.Run(ctx, orDefault(s.Scancel, "scancel"), id); err != nil {
			return "", fmt.Errorf("cancel job %s: %w", id, err)
		}
		after, err := s.JobState(ctx, id)
		if err != nil {
			return "", fmt.Errorf("after cancelling job %s: %w", id, err)
		}
		if active[after] {
			return "", fmt.Errorf("job %s still %s after scancel", id, after)
		}
		return fmt.Sprintf("cancelled job %s (state %s, now %s)", id, before, stateWord(after)), nil
	}
	return "", fmt.Errorf("slurm %s: %w", req.Step, ErrUnsupported)
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
	if active[st] {
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
