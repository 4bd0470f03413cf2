package nvmlcheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/nvmlcheck"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// An orphan finding on a real process: killed only while the NVML mock
// lists it with memory on the finding's GPU; when NVML does not list it, the
// kill is refused and the audit says why.
func TestOrphanKillConfirmedByNVML(t *testing.T) {
	for _, listed := range []bool{true, false} {
		t.Run(map[bool]string{true: "listed", false: "not listed"}[listed], func(t *testing.T) {
			child := exec.Command("sleep", "60")
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = child.Process.Kill() })
			go func() { _ = child.Wait() }() // reaps it once killed
			pid := child.Process.Pid
			srv := dgxa100.New()
			dev := srv.Devices[2].(*server.Device)
			uuid, _ := dev.GetUUID()
			dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
				if !listed {
					return []nvml.ProcessInfo{{Pid: uint32(pid + 1), UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
				}
				return []nvml.ProcessInfo{{Pid: uint32(pid), UsedGpuMemory: 2 << 30}}, nvml.SUCCESS
			}
			pol, err := policy.Parse([]byte(`
dry_run: false
min_warning: 0s
tiers:
  - name: all
    reclaim: true
    rules:
      - pattern: orphan_process
        steps: [{action: warn}, {action: reclaim}]
channels:
  webhook: {url: "http://127.0.0.1:1/unused"}
`))
			if err != nil {
				t.Fatal(err)
			}
			st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			lg, err := audit.Open(context.Background(), st)
			if err != nil {
				t.Fatal(err)
			}
			var signals []syscall.Signal
			host, _ := os.Hostname()
			procs := &action.Processes{Hostname: host, Grace: 2 * time.Second, Poll: 20 * time.Millisecond,
				GPUs:   &nvmlcheck.NVML{Lib: srv},
				Signal: func(pid int, sig syscall.Signal) error { signals = append(signals, sig); return syscall.Kill(pid, sig) }}
			e := &daemon.Escalator{Policy: pol, Log: lg, Facts: &facts.Resolver{},
				Actuators: map[string]action.Actuator{"process": procs, "webhook": okHook{}}}
			comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
			now := time.Now()
			f := finding.Finding{Pattern: schema.OrphanProcess, Severity: schema.SeverityCritical, Job: "orphan:" + uuid, Hostname: host,
				GPUs: []string{uuid}, PIDs: []int{pid}, Commands: map[int]string{pid: strings.TrimSpace(string(comm))},
				Start: now.Add(time.Second), End: now.Add(time.Second), WastedGPUHours: 1}
			if _, err := e.Cycle(context.Background(), now.Add(2*time.Second), []finding.Finding{f}); err != nil {
				t.Fatal(err)
			}
			evs, _ := lg.Events(context.Background(), audit.Filter{})
			var reclaim audit.Event
			for _, ev := range evs {
				if ev.Step == "reclaim" && ev.State != audit.Intended {
					reclaim = ev
				}
			}
			if listed {
				if len(signals) == 0 || signals[0] != syscall.SIGTERM || reclaim.State != audit.Done {
					t.Fatalf("listed orphan: signals %v, audit %+v", signals, reclaim)
				}
				return
			}
			if len(signals) != 0 {
				t.Fatalf("signalled %v a process NVML does not list", signals)
			}
			if reclaim.State != audit.Skipped || !strings.Contains(reclaim.Detail, "holds no memory on GPU "+uuid) {
				t.Fatalf("audit of the refused kill = %+v", reclaim)
			}
		})
	}
}

type okHook struct{}

func (okHook) Name() string                                         { return "webhook" }
func (okHook) Act(context.Context, *action.Request) (string, error) { return "ok", nil }
