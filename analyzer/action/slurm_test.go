package action

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fakeSlurm answers squeue --json and scancel like a tiny slurmctld of
// Slurm 22.05 (which lists every job whatever --jobs asks), without
// accounting (sacct fails).
type fakeSlurm struct {
	states map[string]string
	calls  []string
	// stuck keeps a job RUNNING after scancel.
	stuck bool
	// nodes, cluster and start are every job's ("gpu[01-02]", "a", t0-1h
	// when unset).
	nodes, cluster string
	start          time.Time
}

func (f *fakeSlurm) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	id := args[len(args)-1]
	switch name {
	case "squeue":
		nodes, cluster, start := orDefault(f.nodes, "gpu[01-02]"), orDefault(f.cluster, "a"), f.start
		if start.IsZero() {
			start = actT0.Add(-time.Hour)
		}
		where := fmt.Sprintf(`"nodes": %q, "cluster": %q, "start_time": %d`, nodes, cluster, start.Unix())
		var jobs []string
		for i, jid := range sortedKeys(f.states) {
			st := f.states[jid]
			if st == "CANCELLED" {
				continue // the controller forgot it
			}
			arr, task, ok := strings.Cut(jid, "_")
			if ok {
				jobs = append(jobs, fmt.Sprintf(`{"job_id": %d, "array_job_id": %s, "array_task_id": %s, "name": "train", "job_state": %q, %s}`, 1000+i, arr, task, st, where))
			} else {
				jobs = append(jobs, fmt.Sprintf(`{"job_id": %s, "array_job_id": 0, "array_task_id": null, "name": "train JobState=COMPLETED", "job_state": %q, %s}`, jid, st, where))
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

// actT0 is when the evidence of the actuator tests' findings begins.
var actT0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

// provenRequest is a step on job as the escalator makes it: the finding
// on gpu02 since actT0, with the proof made at decision time.
func provenRequest(step, job string) *Request {
	return &Request{Step: step, Signal: "USR1", Finding: finding.Finding{Job: job, Pattern: schema.CPUOnly, Hostname: "gpu02",
		Scheduler: schema.SchedulerSlurm, Start: actT0}, Target: &target.Proof{Verdict: target.Proven}}
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
			_, err := s.Act(context.Background(), provenRequest(tc.step, tc.job))
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

// TestSlurmChecksTheTargetBeforeScancel: right before scancel (or its
// signal) the actuator reads the job again and refuses, without any
// scancel, a step whose job is now another workload under the same id,
// or that comes without a proof.
func TestSlurmChecksTheTargetBeforeScancel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fs      fakeSlurm
		cluster string
		mutate  func(r *Request)
		want    string // "" for a scancel sent
	}{
		{"same job", fakeSlurm{}, "", nil, ""},
		{"same job, same cluster", fakeSlurm{cluster: "a"}, "a", func(r *Request) { r.Finding.Cluster = "a" }, ""},
		{"requeued onto other nodes", fakeSlurm{nodes: "gpu[03-04]"}, "", nil, `host "gpu02"`},
		{"id reused by a later job", fakeSlurm{start: actT0.Add(time.Hour)}, "", nil, "started"},
		{"another cluster's controller", fakeSlurm{cluster: "b"}, "a", nil, "--slurm.cluster"},
		{"finding of another cluster", fakeSlurm{}, "a", func(r *Request) { r.Finding.Cluster = "b" }, `the series say "b"`},
		{"hostile host list", fakeSlurm{nodes: "gpu[0-99999999]"}, "", nil, "unreadable"},
		{"no proof", fakeSlurm{}, "", func(r *Request) { r.Target = nil }, "no proof"},
		{"proof of a mismatch", fakeSlurm{}, "", func(r *Request) { r.Target = &target.Proof{Verdict: target.Mismatch} }, "no proof"},
		{"unknown proof", fakeSlurm{}, "", func(r *Request) { r.Target = &target.Proof{Verdict: target.Unknown} }, "no proof"},
		{"forged verdict word", fakeSlurm{}, "", func(r *Request) { r.Target = &target.Proof{Verdict: "Proven"} }, "no proof"},
	} {
		for _, step := range []string{StepReclaim, StepCheckpoint} {
			t.Run(tc.name+"/"+step, func(t *testing.T) {
				fs := tc.fs
				fs.states = map[string]string{"42": "RUNNING"}
				req := provenRequest(step, "42")
				if tc.mutate != nil {
					tc.mutate(req)
				}
				_, err := (&Slurm{Runner: &fs, Cluster: tc.cluster}).Act(context.Background(), req)
				sent := false
				for _, c := range fs.calls {
					sent = sent || strings.HasPrefix(c, "scancel")
				}
				if tc.want == "" {
					if err != nil || !sent {
						t.Fatalf("err %v, scancel sent %v", err, sent)
					}
					return
				}
				if sent || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("scancel sent %v, err %v; want refused saying %q", sent, err, tc.want)
				}
				if fs.states["42"] != "RUNNING" {
					t.Fatalf("job is %s", fs.states["42"])
				}
			})
		}
	}
}
