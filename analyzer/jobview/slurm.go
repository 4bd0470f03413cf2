package jobview

import (
	"context"
	"strings"

	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
)

// Slurm asks the Slurm adapter about a job (squeue --json, then sacct
// --json for jobs the controller forgot) and writes the end-of-job
// summary into its AdminComment.
type Slurm struct {
	Runner   execrun.Runner
	Squeue   string // default "squeue"
	Sacct    string // default "sacct"
	Scontrol string // default "scontrol": writes AdminComment while the job runs
	Sacctmgr string // default "sacctmgr": writes it into accounting after
}

func (s *Slurm) client() *slurm.Client {
	return &slurm.Client{Runner: s.Runner, Squeue: s.Squeue, Sacct: s.Sacct, Scontrol: s.Scontrol, Sacctmgr: s.Sacctmgr}
}

// Job returns what Slurm says of the job, or nil when Slurm does not know
// it. Every field comes from Slurm's JSON, none from text a user wrote.
func (s *Slurm) Job(ctx context.Context, id string) (*Scheduler, error) {
	c := s.client()
	j, err := c.Job(ctx, id)
	if err != nil || j == nil {
		return nil, err
	}
	// The Epilog's summary went into accounting, not into slurmctld's
	// copy of the finished job, which it keeps for MinJobAge more.
	if !strings.HasPrefix(j.AdminComment, SummaryPrefix) && slurm.Finished(j.State) {
		if acct, _ := c.Accounted(ctx, id); acct != nil && strings.HasPrefix(acct.AdminComment, SummaryPrefix) {
			j.AdminComment = acct.AdminComment
		}
	}
	return &Scheduler{ID: j.ID, State: j.State, User: j.User, Account: j.Account, Name: j.Name, CPUs: j.CPUs,
		Start: j.Start, End: j.End, AdminComment: j.AdminComment}, nil
}

// maxCommentBytes bounds what is written to AdminComment.
const maxCommentBytes = slurm.MaxCommentBytes

// SetAdminComment writes the comment (scontrol update while the job runs,
// else sacctmgr into accounting).
func (s *Slurm) SetAdminComment(ctx context.Context, id, comment string) error {
	return s.client().SetAdminComment(ctx, id, comment)
}
