// Package slurm is gpuwatch's one adapter to Slurm: every call to squeue,
// sacct, sinfo, scancel, scontrol and sacctmgr is made here, for the facts of a
// policy decision, the job view, the end-of-job summary, the actuator and
// reconcile.
//
// Identity and state are read only from machine-readable output that user
// text cannot forge: `squeue --json` and `sacct --json`. A job name, a
// comment or a work directory is user text; in JSON it is one string
// value and cannot pose as another field. `scontrol --oneliner show job`
// prints JobName= before the real UserId=, Account= and JobState=, so a
// job named "x UserId=victim(2001)" reads as the victim's: scontrol is
// used to write (an argument list, never a shell) and never parsed.
package slurm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/execrun"
)

// Job is what Slurm says of one job, from its JSON.
type Job struct {
	// ID is the job id; for an array task, "<array job>_<task>".
	ID string
	// Alias is the array task's own numeric job id, "" for other jobs.
	Alias     string
	Name      string // user text: shown escaped, never parsed
	User      string
	UserID    int64
	Account   string
	Partition string
	QoS       string
	// State is Slurm's base state in capitals (RUNNING, COMPLETED, ...).
	State string
	CPUs  int
	// TimeLimit is 0 when the job has none.
	TimeLimit time.Duration
	Start     time.Time
	End       time.Time
	// Nodes is the job's host list as Slurm compresses it ("gpu[01-04]");
	// ExpandHostlist reads it.
	Nodes string
	// Cluster is the name of the cluster whose controller reported the
	// job (ClusterName in slurm.conf).
	Cluster string
	// AdminComment can be written only by an administrator (and gpuwatch
	// as one); it holds the end-of-job summary.
	AdminComment string
	// Batch is Slurm's batch flag: true for a job submitted with sbatch,
	// false for an allocation from salloc or srun (an interactive session);
	// nil when the output did not carry it (sacct --json does not).
	Batch *bool
}

// Client runs Slurm's commands through Runner. Program names default to
// the plain command names, found on PATH.
type Client struct {
	Runner   execrun.Runner
	Squeue   string
	Sacct    string
	Scancel  string
	Scontrol string
	Sacctmgr string
	Sinfo    string
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var (
	jobID      = regexp.MustCompile(`^[0-9]{1,12}(_[0-9]{1,12})?$`)
	stateWord  = regexp.MustCompile(`^[A-Z_]{1,32}$`)
	signalName = regexp.MustCompile(`^(USR1|USR2|TERM|INT|HUP|QUIT|CONT|STOP|ALRM|KILL|URG|XCPU)$`)
)

// ErrInvalid marks an argument refused before any command runs.
var ErrInvalid = errors.New("invalid")

// ValidJobID reports whether id is a Slurm job id (array tasks included).
func ValidJobID(id string) bool { return jobID.MatchString(id) }

// clusterName is a ClusterName as slurm.conf allows it.
var clusterName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidClusterName reports whether name is a Slurm cluster name.
func ValidClusterName(name string) bool { return clusterName.MatchString(name) }

func checkID(id string) error {
	if !ValidJobID(id) {
		return fmt.Errorf("slurm job %q: not a job id: %w", id, ErrInvalid)
	}
	return nil
}

// Jobs lists every job the controller knows, with one `squeue --json`.
// Slurm 22.05 ignores job filters with --json, so the call lists them all
// whatever is asked.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	out, err := c.Runner.Run(ctx, orDefault(c.Squeue, "squeue"), "--json")
	if err != nil {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	return decodeSqueue(out)
}

// Reachable asks the controller for a job name no job has: nil when Slurm
// answers (with nothing), else the error that squeue's last line gives (no
// slurm.conf, no controller).
func (c *Client) Reachable(ctx context.Context) error {
	_, err := c.Runner.Run(ctx, orDefault(c.Squeue, "squeue"), "--noheader", "--format=%i", "--name=gpuwatch-reachability-check")
	if err == nil {
		return nil
	}
	// squeue's last line says why ("fatal: Could not establish a
	// configuration source"); the lines before are its attempts.
	msg := err.Error()
	if i := strings.LastIndex(msg, " … "); i >= 0 {
		msg = msg[i+len(" … "):]
	}
	return errors.New(msg)
}

// Job returns what Slurm says of one job: the controller's record while
// it keeps the job, else accounting's (sacct), else nil.
func (c *Client) Job(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	// --jobs narrows the answer on releases that honour it.
	out, err := c.Runner.Run(ctx, orDefault(c.Squeue, "squeue"), "--json", "--jobs="+id)
	if err != nil && !invalidJob(err) {
		return nil, fmt.Errorf("squeue --json: %w", err)
	}
	if err == nil {
		jobs, err := decodeSqueue(out)
		if err != nil {
			return nil, err
		}
		if j := find(jobs, id); j != nil {
			return j, nil
		}
	}
	return c.Accounted(ctx, id)
}

// Accounted returns accounting's record of the job (sacct --json), nil
// when accounting does not know it or there is no accounting.
func (c *Client) Accounted(ctx context.Context, id string) (*Job, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	out, err := c.Runner.Run(ctx, orDefault(c.Sacct, "sacct"), "--json", "--allocations", "--jobs="+id)
	if err != nil {
		return nil, nil //nolint:nilerr // no sacct or no slurmdbd: accounting does not know the job
	}
	jobs, err := decodeSacct(out)
	if err != nil {
		return nil, err
	}
	return find(jobs, id), nil
}

func find(jobs []Job, id string) *Job {
	for i := range jobs {
		if jobs[i].ID == id || jobs[i].Alias == id {
			return &jobs[i]
		}
	}
	return nil
}

// invalidJob tells Slurm's "Invalid job id specified", which releases
// that honour --jobs answer for a job they no longer keep.
func invalidJob(err error) bool { return strings.Contains(err.Error(), "Invalid job id") }

// State returns the job's state, "" when Slurm no longer knows the job.
func (c *Client) State(ctx context.Context, id string) (string, error) {
	j, err := c.Job(ctx, id)
	if err != nil || j == nil {
		return "", err
	}
	return j.State, nil
}

// Active reports whether a state still holds or will hold resources.
func Active(state string) bool {
	switch state {
	case "RUNNING", "PENDING", "SUSPENDED", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESIZING", "SIGNALING":
		return true
	}
	return false
}

// Finished reports whether a state is past running (COMPLETING included:
// the Epilog runs then).
func Finished(state string) bool {
	switch state {
	case "", "PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "STOPPED", "SIGNALING":
		return false
	}
	return true
}

// Signal sends a signal to every step of the job and its batch script
// (scancel --signal --full).
func (c *Client) Signal(ctx context.Context, id, sig string) error {
	if err := checkID(id); err != nil {
		return err
	}
	sig = strings.TrimPrefix(sig, "SIG")
	if !signalName.MatchString(sig) {
		return fmt.Errorf("signal %q: %w", sig, ErrInvalid)
	}
	if _, err := c.Runner.Run(ctx, orDefault(c.Scancel, "scancel"), "--signal="+sig, "--full", id); err != nil {
		return fmt.Errorf("signal job %s: %w", id, err)
	}
	return nil
}

// Cancel cancels the job.
func (c *Client) Cancel(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if _, err := c.Runner.Run(ctx, orDefault(c.Scancel, "scancel"), id); err != nil {
		return fmt.Errorf("cancel job %s: %w", id, err)
	}
	return nil
}

// MaxCommentBytes bounds what is written to AdminComment: Slurm keeps it
// in the controller's memory and in accounting, for every job.
const MaxCommentBytes = 1024

// SetAdminComment writes the comment: with scontrol update while
// slurmctld still lets the job be changed (it refuses once the job
// finished, which it has by the time the Epilog runs), else into
// accounting with sacctmgr, where `sacct` shows it from then on. Both are
// argument lists: the value never meets a shell.
func (c *Client) SetAdminComment(ctx context.Context, id, comment string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if len(comment) > MaxCommentBytes || strings.ContainsAny(comment, " \t\n\r") || comment == "" {
		return fmt.Errorf("admin comment: empty, longer than %d bytes or not one word: %w", MaxCommentBytes, ErrInvalid)
	}
	_, err := c.Runner.Run(ctx, orDefault(c.Scontrol, "scontrol"), "update", "JobId="+id, "AdminComment="+comment)
	if err == nil {
		return nil
	}
	if _, aerr := c.Runner.Run(ctx, orDefault(c.Sacctmgr, "sacctmgr"), "--immediate", "update", "job", "where",
		"jobid="+id, "set", "AdminComment="+comment); aerr != nil {
		return fmt.Errorf("scontrol update job %s: %w; sacctmgr: %w", id, err, aerr)
	}
	return nil
}
