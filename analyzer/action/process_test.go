package action

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestHelperIgnoresTERM is not a test: it is the orphan that ignores SIGTERM,
// started by TestProcessesKill as a child of the test binary.
func TestHelperIgnoresTERM(t *testing.T) {
	if os.Getenv("GPUWATCH_HELPER_IGNORE_TERM") != "1" {
		t.Skip("helper process")
	}
	signal.Ignore(syscall.SIGTERM)
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(0)
}

func startChild(t *testing.T, ignoreTERM bool) *exec.Cmd {
	t.Helper()
	var cmd *exec.Cmd
	if ignoreTERM {
		cmd = exec.Command(os.Args[0], "-test.run=^TestHelperIgnoresTERM$")
		cmd.Env = append(os.Environ(), "GPUWATCH_HELPER_IGNORE_TERM=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		if _, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf), "ready") {
			t.Fatalf("helper not ready: %q %v", buf, err)
		}
	} else {
		cmd = exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	go func() { _ = cmd.Wait() }() // reap, so the ended child is not a zombie for long (the one Wait)
	return cmd
}

func TestProcessesKill(t *testing.T) {
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignores TERM=%v", ignore), func(t *testing.T) {
			cmd := startChild(t, ignore)
			pid := cmd.Process.Pid
			var sent []syscall.Signal
			p := &Processes{Hostname: "n1", Grace: 300 * time.Millisecond, Poll: 20 * time.Millisecond, GPUs: gpuTable{"GPU-0": {pid: 1 << 30}},
				Signal: func(pid int, sig syscall.Signal) error { sent = append(sent, sig); return syscall.Kill(pid, sig) }}
			req := &Request{Step: StepReclaim, Finding: finding.Finding{Pattern: schema.OrphanProcess, Hostname: "n1",
				Job: "orphan", PIDs: []int{pid}, GPUs: []string{"GPU-0"}, Start: time.Now(), End: time.Now()}}
			detail, err := p.Act(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := []syscall.Signal{syscall.SIGTERM}
			if ignore {
				want = append(want, syscall.SIGKILL)
			}
			if fmt.Sprint(sent) != fmt.Sprint(want) {
				t.Fatalf("signals %v, want %v (%s)", sent, want, detail)
			}
			if out, _, _ := p.Reconcile(context.Background(), req); out != Applied {
				t.Fatalf("reconcile after kill = %v", out)
			}
		})
	}
}

func fakeProc(t *testing.T, pid int, startTicks int, state, cgroup string) string {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "stat"), []byte("cpu 1 2 3\nbtime 1770000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The command name holds spaces and a parenthesis on purpose.
	stat := fmt.Sprintf("%d (python (train) x) %s 1 %d 0 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1000 10\n", pid, state, pid, startTicks)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"comm": "python (train) x\n", "status": "Name:\tpython\nUid:\t1000\t1000\t1000\t1000\n",
		"cgroup": cgroup, "environ": ""} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// gpuTable stands in for NVML: the PIDs holding memory on each GPU.
type gpuTable map[string]map[int]uint64

func (g gpuTable) Holders(uuid string) (map[int]uint64, error) {
	m, ok := g[uuid]
	if !ok {
		return nil, fmt.Errorf("NVML: GPU %s: not found", uuid)
	}
	return m, nil
}

// absent marks a case without NVML.
type absent struct{}

func (absent) Holders(string) (map[int]uint64, error) { return nil, nil }

var noNVML = absent{}

func TestProcessesNeverHitReusedPID(t *testing.T) {
	boot := time.Unix(1770000000, 0)
	evidence := boot.Add(time.Hour)
	cases := []struct {
		name    string
		ticks   int // start time in ticks after boot
		state   string
		pids    []int
		host    string
		wantErr error
		signals int
		gpus    GPUProcesses
		cgroup  string
		command string
	}{
		{"reused pid started after the evidence", 2 * 3600 * clockTicks, "S", []int{4242}, "n1", ErrGone, 0, nil, "", ""},
		{"zombie", 60 * clockTicks, "Z", []int{4242}, "n1", ErrGone, 0, nil, "", ""},
		{"gone", 60 * clockTicks, "S", []int{4343}, "n1", ErrGone, 0, nil, "", ""},
		{"other host", 60 * clockTicks, "S", []int{4242}, "n2", ErrUnsupported, 0, nil, "", ""},
		{"init refused", 60 * clockTicks, "S", []int{1}, "n1", ErrInvalid, 0, nil, "", ""},
		{"the orphan itself", 60 * clockTicks, "S", []int{4242}, "n1", nil, 2, nil, "", ""},
		{"no NVML", 60 * clockTicks, "S", []int{4242}, "n1", ErrNoNVML, 0, noNVML, "", ""},
		{"NVML does not list it", 60 * clockTicks, "S", []int{4242}, "n1", ErrRefused, 0, gpuTable{"GPU-0": {4343: 1 << 30}}, "", ""},
		{"listed without memory", 60 * clockTicks, "S", []int{4242}, "n1", ErrRefused, 0, gpuTable{"GPU-0": {4242: 0}}, "", ""},
		{"another command", 60 * clockTicks, "S", []int{4242}, "n1", ErrRefused, 0, nil, "", "sshd"},
		{"in a job no scheduler vouches for", 60 * clockTicks, "S", []int{4242}, "n1", ErrRefused, 0, nil, "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cg := tc.cgroup
			if cg == "" {
				cg = "0::/user.slice/user-1000.slice/session-1.scope\n"
			}
			root := fakeProc(t, 4242, tc.ticks, tc.state, cg)
			n := 0
			gpus := tc.gpus
			switch gpus.(type) {
			case absent:
				gpus = nil
			case nil:
				gpus = gpuTable{"GPU-0": {4242: 1 << 30}}
			}
			command := tc.command
			if command == "" {
				command = "python (train) x"
			}
			p := &Processes{Hostname: "n1", ProcRoot: root, Grace: 50 * time.Millisecond, Poll: 10 * time.Millisecond, GPUs: gpus,
				Signal: func(pid int, sig syscall.Signal) error {
					n++
					if sig == syscall.SIGKILL { // the fake process dies only of SIGKILL
						return os.RemoveAll(filepath.Join(root, fmt.Sprint(pid)))
					}
					return nil
				}}
			_, err := p.Act(context.Background(), &Request{Step: StepReclaim, Finding: finding.Finding{
				Pattern: schema.OrphanProcess, Hostname: tc.host, PIDs: tc.pids, GPUs: []string{"GPU-0"},
				Commands: map[int]string{4242: command}, Start: evidence, End: evidence}})
			if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			// The fake process ignores SIGTERM: SIGTERM, then SIGKILL.
			if n != tc.signals {
				t.Fatalf("%d signals sent, want %d", n, tc.signals)
			}
		})
	}
}
