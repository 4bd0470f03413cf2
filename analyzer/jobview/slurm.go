package jobview

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Runner runs a command from an argument list (never through a shell) and
// returns its standard output; action.ExecRunner is one.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Slurm asks Slurm about a job with scontrol (and sacct, when accounting
// keeps jobs scontrol has forgotten) and writes the end-of-job summary
// into its AdminComment.
type Slurm struct {
	Runner   Runner
	Scontrol string // default "scontrol"
	Sacct    string // default "sacct"
	Sacctmgr string // default "sacctmgr"
}

func (s *Slurm) scontrol() string { return orDefault(s.Scontrol, "scontrol") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// field starts a Key= pair of scontrol's one-line output.
var field = regexp.MustCompile(`(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=`)

// parseFields splits `scontrol --oneliner show job` output into its
// key=value pairs; a value runs to the next key (JobName may hold spaces).
func parseFields(out string) map[string]string {
	out = strings.TrimSpace(out)
	idx := field.FindAllStringSubmatchIndex(out, -1)
	m := map[string]string{}
	for i, ix := range idx {
		end := len(out)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		key := out[ix[2]:ix[3]]
		if _, dup := m[key]; !dup {
			m[key] = strings.TrimSpace(out[ix[1]:end])
		}
	}
	return m
}

// Job returns what Slurm says of the job, or nil when neither scontrol nor
// sacct knows it.
func (s *Slurm) Job(ctx context.Context, id string) (*Scheduler, error) {
	if !slurmID.MatchString(id) {
		return nil, fmt.Errorf("slurm job %q: not a job id", id)
	}
	out, err := s.Runner.Run(ctx, s.scontrol(), "--oneliner", "show", "job", id)
	if err != nil {
		if strings.Contains(err.Error(), "Invalid job id") {
			return s.sacct(ctx, id)
		}
		return nil, fmt.Errorf("scontrol show job %s: %w", id, err)
	}
	f := parseFields(string(out))
	sc := &Scheduler{State: f["JobState"], Account: null(f["Account"]), Name: f["JobName"], AdminComment: null(f["AdminComment"])}
	sc.User, _, _ = strings.Cut(f["UserId"], "(")
	sc.CPUs, _ = strconv.Atoi(f["NumCPUs"])
	sc.Start, sc.End = slurmTime(f["StartTime"]), slurmTime(f["EndTime"])
	// The Epilog's summary went into accounting, not into slurmctld's
	// copy of the finished job, which it keeps for MinJobAge more.
	if !strings.HasPrefix(sc.AdminComment, SummaryPrefix) && finished(sc.State) {
		if acct, _ := s.sacct(ctx, id); acct != nil && strings.HasPrefix(acct.AdminComment, SummaryPrefix) {
			sc.AdminComment = acct.AdminComment
		}
	}
	return sc, nil
}

// finished tells a job state past running (COMPLETING included: its Epilog
// runs then).
func finished(state string) bool {
	switch state {
	case "", "PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "STOPPED", "SIGNALING":
		return false
	}
	return true
}

// sacct reads the AdminComment that accounting keeps after scontrol forgot
// the job; without accounting (no sacct, or no slurmdbd) there is nothing.
func (s *Slurm) sacct(ctx context.Context, id string) (*Scheduler, error) {
	out, err := s.Runner.Run(ctx, orDefault(s.Sacct, "sacct"), "--noheader", "--parsable2", "--allocations",
		"--jobs="+id, "--format=State,User,Account,JobName,AllocCPUS,AdminComment")
	if err != nil {
		return nil, nil //nolint:nilerr // no accounting: Slurm no longer knows the job
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	p := strings.SplitN(line, "|", 6)
	if len(p) < 6 {
		return nil, nil
	}
	sc := &Scheduler{State: strings.Fields(p[0] + " ")[0], User: p[1], Account: p[2], Name: p[3], AdminComment: p[5]}
	sc.CPUs, _ = strconv.Atoi(p[4])
	return sc, nil
}

func null(s string) string {
	if s == "(null)" {
		return ""
	}
	return s
}

// slurmTime reads scontrol's local times; Unknown and None are zero.
func slurmTime(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		return time.Time{}
	}
	return t
}

// maxCommentBytes bounds what is written to AdminComment: Slurm keeps it
// in the controller's memory and in accounting, for every job.
const maxCommentBytes = 1024

// SetAdminComment writes the comment: with scontrol update while
// slurmctld still lets the job be changed (it refuses once the job
// finished, "Job has already finished", which it has by the time the
// Epilog runs, COMPLETING), else into accounting with sacctmgr, as
// Princeton's jobstats does, where slurmdbd keeps jobs; `sacct -o
// AdminComment` shows it from then on. Both are argument lists: the value
// never meets a shell.
func (s *Slurm) SetAdminComment(ctx context.Context, id, comment string) error {
	if !slurmID.MatchString(id) {
		return fmt.Errorf("slurm job %q: not a job id", id)
	}
	if len(comment) > maxCommentBytes || strings.ContainsAny(comment, " \t\n\r") {
		return errors.New("admin comment: too long or not one word")
	}
	_, err := s.Runner.Run(ctx, s.scontrol(), "update", "JobId="+id, "AdminComment="+comment)
	if err == nil {
		return nil
	}
	if _, aerr := s.Runner.Run(ctx, orDefault(s.Sacctmgr, "sacctmgr"), "--immediate", "update", "job", "where",
		"jobid="+id, "set", "AdminComment="+comment); aerr != nil {
		return fmt.Errorf("scontrol update job %s: %w; sacctmgr: %w", id, err, aerr)
	}
	return nil
}
