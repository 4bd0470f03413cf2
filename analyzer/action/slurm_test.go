package action

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// fakeSlurm answers squeue --json and scancel like a tiny slurmctld of
// Slurm 22.05 (which lists every job whatever --jobs asks), without
// accounting (sacct fails).
type fakeSlurm struct {
	states map[string]string
	calls  []string
	// stuck keeps a job RUNNING after scancel.
	stuck bool
}

func (f *fakeSlurm) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	id := args[len(args)-1]
	switch name {
	case "squeue":
		var jobs []string
		for i, jid := range sortedKeys(f.states) {
			st := f.states[jid]
			if st == "CANCELLED" {
				continue // the controller forgot it
			}
			arr, task, ok := strings.Cut(jid, "_")
			if ok {
				jobs = append(jobs, fmt.Sprintf(`{"job_id": %d, "array_job_id": %s, "array_task_id": %s, "name": "train", "job_state": %q}`, 1000+i, arr, task, st))
			} else {
				jobs = append(jobs, fmt.Sprintf(`{"job_id": %s, "array_job_id": 0, "array_task_id": null, "name": "train JobState=COMPLETED", "job_state": %q}`, jid, st))
			}
		}
		return []byte(`{"errors": [], "jobs": [` + strings.Join(jobs, ",") + `]}`), nil
	case "sacct":
		return nil, errors.New("sacct: error: Problem talking to the database: Connection refused")
	case "scancel":
		if _, ok := f.states[id]; !ok {
			return nil, errors.New("scancel: error: Kill job error on job id " + id + ": Invalid job id specified")
		}
		if len(args) == 1 && !f.stuck {
			f.states[id] = "CANCELLED"
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected command %s", name)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestSlurm(t *testing.T) {
	cases := []struct {
		name    string
		step    string
		job     string
		state   string
		stuck   bool
		wantErr error
		wantCmd string
		after   string
	}{
		{"checkpoint", StepCheckpoint, "42", "RUNNING", false, nil, "scancel --signal=USR1 --full 42", "RUNNING"},
		{"checkpoint pending job", StepCheckpoint, "42", "PENDING", false, ErrGone, "", "PENDING"},
		{"cancel", StepReclaim, "42", "RUNNING", false, nil, "scancel 42", "CANCELLED"},
		{"cancel array task", StepReclaim, "42_3", "RUNNING", false, nil, "scancel 42_3", "CANCELLED"},
		{"cancel finished job", StepReclaim, "42", "COMPLETED", false, ErrGone, "", "COMPLETED"},
		{"cancel unknown job", StepReclaim, "43", "", false, ErrGone, "", ""},
		{"cancel that does not take", StepReclaim, "42", "RUNNING", true, errors.New("still RUNNING"), "scancel 42", "RUNNING"},
		{"injection refused", StepReclaim, "42;rm -rf /", "RUNNING", false, ErrInvalid, "", "RUNNING"},
		{"option refused", StepReclaim, "--user=root", "RUNNING", false, ErrInvalid, "", "RUNNING"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeSlurm{states: map[string]string{}, stuck: tc.stuck}
			if tc.state != "" {
				fs.states["42"], fs.states["42_3"] = tc.state, tc.state
			}
			s := &Slurm{Runner: fs}
			req := &Request{Step: tc.step, Signal: "USR1", Finding: finding.Finding{Job: tc.job, Pattern: schema.CPUOnly}}
			_, err := s.Act(context.Background(), req)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantErr != nil && err == nil:
				t.Fatalf("want error %v", tc.wantErr)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr) && !strings.Contains(err.Error(), tc.wantErr.Error()):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var cancels []string
			for _, c := range fs.calls {
				if strings.HasPrefix(c, "scancel") {
					cancels = append(cancels, c)
				}
			}
			if want := tc.wantCmd; (want == "" && len(cancels) != 0) || (want != "" && (len(cancels) != 1 || cancels[0] != want)) {
				t.Fatalf("scancel calls %v, want %q", cancels, want)
			}
			if tc.state != "" && fs.states["42"] != tc.after && fs.states["42_3"] != tc.after {
				t.Errorf("state after = %s, want %s", fs.states["42"], tc.after)
			}
		})
	}
}

func TestSlurmReconcile(t *testing.T) {
	for _, tc := range []struct {
		state string
		step  string
		want  Outcome
	}{
		{"RUNNING", StepReclaim, NotApplied},
		{"PENDING", StepReclaim, NotApplied},
		{"CANCELLED", StepReclaim, Applied},
		{"", StepReclaim, Applied},
		{"RUNNING", StepCheckpoint, Unknowable},
	} {
		fs := &fakeSlurm{states: map[string]string{}}
		if tc.state != "" {
			fs.states["9"] = tc.state
		}
		s := &Slurm{Runner: fs}
		got, _, err := s.Reconcile(context.Background(), &Request{Step: tc.step, Finding: finding.Finding{Job: "9"}})
		if err != nil || got != tc.want {
			t.Errorf("%s/%s: got %v, %v; want %v", tc.step, tc.state, got, err, tc.want)
		}
	}
}
