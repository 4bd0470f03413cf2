package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const cid = "3a9f1c2b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"

func TestProcess(t *testing.T) {
	root := t.TempDir()
	err := WriteFixture(root,
		FakeProcess{PID: 100, Comm: "python (train) x", UID: 1000, Start: 555, Cgroup: "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"},
		FakeProcess{PID: 200, Comm: "jupyter", UID: 2000, Start: 1, Cgroup: "0::/kubepods/burstable/pod0f2a4b9c-3d1e-4f5a-8b7c-6d5e4f3a2b1c/" + cid + "\n"},
		FakeProcess{PID: 300, Comm: "Xorg", UID: 0, Start: 1, Cgroup: "0::/system.slice/display-manager.service\n"},
		FakeProcess{PID: 400, Comm: "broken", UID: 3000, Start: 1, Cgroup: "12:memory\n"},
		FakeProcess{PID: 500, Comm: "srun-task", UID: 1000, Start: 1, Cgroup: "0::/system.slice/slurmd.service\n", Environ: []string{"PATH=/bin", "SLURM_JOB_ID=4711", "SLURM_JOB_GPUS=0,1"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(1000, 0)
	lookups := 0
	users := map[int]string{1000: "alice", 0: "root"}
	r := New(root, func(uid int) (string, error) {
		lookups++
		if n, ok := users[uid]; ok {
			return n, nil
		}
		return "", errors.New("unknown user")
	})
	r.Now = func() time.Time { return clock }
	cases := []struct {
		pid                 int
		cmd, user, job, pod string
		owned               bool
		wantErr             string
	}{
		{100, "python (train) x", "alice", "42", "", true, ""},
		{200, "jupyter", "2000", "", "0f2a4b9c-3d1e-4f5a-8b7c-6d5e4f3a2b1c", true, ""},
		{300, "Xorg", "root", "", "", false, ""},
		{500, "srun-task", "alice", "", "", false, ""},
		{400, "broken", "3000", "", "", false, "line 1"},
		{999, "", "", "", "", false, "no such file"},
	}
	for _, tc := range cases {
		info, err := r.Process(tc.pid)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("pid %d: err = %v, want %q", tc.pid, err, tc.wantErr)
			}
			if tc.pid == 999 && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pid 999: err %v is not ErrNotExist", err)
			}
		} else if err != nil {
			t.Errorf("pid %d: %v", tc.pid, err)
		}
		if tc.pid == 500 && info.EnvJob != "4711" {
			t.Errorf("pid 500: EnvJob = %q, want 4711", info.EnvJob)
		}
		if info.Command != tc.cmd || info.User != tc.user || info.Owner.SlurmJob != tc.job || info.Owner.PodUID != tc.pod || info.HasOwner != tc.owned {
			t.Errorf("pid %d: got %+v", tc.pid, info)
		}
	}
	// Cached: a second read does not look the user up again.
	before := lookups
	if _, err := r.Process(100); err != nil {
		t.Fatal(err)
	}
	if lookups != before {
		t.Errorf("user looked up again for a cached process")
	}
	// PID reuse: a new start time means a new process, read afresh.
	if err := WriteFixture(root, FakeProcess{PID: 100, Comm: "bash", UID: 0, Start: 777, Cgroup: "0::/user.slice\n"}); err != nil {
		t.Fatal(err)
	}
	info, err := r.Process(100)
	if err != nil || info.Command != "python (train) x" {
		t.Fatalf("trusted cache re-read within Recheck: %+v, %v", info, err)
	}
	clock = clock.Add(r.Recheck)
	info, err = r.Process(100)
	if err != nil || info.Command != "bash" || info.HasOwner {
		t.Fatalf("reused pid: %+v, %v", info, err)
	}
	r.Forget(map[int]bool{})
	if len(r.procs) != 0 {
		t.Fatalf("Forget kept %d processes", len(r.procs))
	}
}

func TestTruncatedStat(t *testing.T) {
	root := t.TempDir()
	if err := WriteFixture(root, FakeProcess{PID: 5, Comm: "a", Start: 1, Cgroup: "0::/\n"}); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"5 (a) S 1 2 3", "5 a S", ""} {
		if err := os.WriteFile(filepath.Join(root, "5", "stat"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := New(root, nil).Process(5); err == nil {
			t.Errorf("stat %q: no error", content)
		}
	}
}
