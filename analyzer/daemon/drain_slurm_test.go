package daemon

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// A node whose GPUs keep faulting, on a real Slurm: the simulator's XIDs
// reach the engine as gpu_fault and app_xid findings, and the drainer
// takes the node out through scontrol. In dry run it only records; for
// real it drains once; the operator's resume is not fought; two new
// hardware faults drain it again. The application's XID 13 never counts.
// The node is drained for a second or two at a time: other packages'
// jobs on this Slurm wait at most that long.
func TestFaultingNodeDrainedOnRealSlurm(t *testing.T) {
	// Serial: it drains the cluster's one node, on which the other tests
	// submit their jobs and which slurmNode wants undrained.
	useTestSlurm(t, false)
	ctx := context.Background()
	sl := &slurm.Client{Runner: execrun.Exec{Timeout: 30 * time.Second}}
	node := slurmNode(t, sl)
	resume := func() {
		if out, err := exec.Command("scontrol", "update", "NodeName="+node, "State=RESUME").CombinedOutput(); err != nil &&
			!strings.Contains(string(out), "Invalid node state") {
			t.Errorf("resume %s: %v: %s", node, err, out)
		}
	}
	t.Cleanup(func() {
		if n, _ := sl.Node(ctx, node); n != nil && n.Drained() {
			resume()
		}
	})
	scenario := fmt.Sprintf(`
name: faulting-node
fleet:
  - {hostname: %[1]s, model: H100-SXM5-80GB, gpus: 8}
workloads:
  - {id: "5001", user: ann, account: dev-a, node: %[1]s, gpus: [0, 1], start: 0s, duration: 5h, behaviour: training}
  - {id: "5002", user: ben, account: dev-a, node: %[1]s, gpus: [2], start: 0s, duration: 5h, behaviour: training}
  - {id: "5003", user: cat, account: dev-a, node: %[1]s, gpus: [3], start: 0s, duration: 5h, behaviour: training}
  - {id: "5004", user: dan, account: dev-a, node: %[1]s, gpus: [4], start: 0s, duration: 5h, behaviour: training}
  - {id: "5005", user: eve, account: dev-a, node: %[1]s, gpus: [5], start: 0s, duration: 5h, behaviour: training}
`+faultingNodeFaults, node)
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	r, d := engineRigFor(t, scenario, origin, 0, 0)
	drainAct := &action.SlurmDrain{Runner: execrun.Exec{Timeout: 30 * time.Second}}
	drained, got := outOfServiceRun(t, r, d, origin, schema.SchedulerSlurm, drainAct, func() bool {
		n, err := sl.Node(ctx, node)
		if err != nil || n == nil {
			t.Fatalf("node %s: %v %v", node, n, err)
		}
		if !n.Drained() {
			return false
		}
		if !strings.Contains(n.Reason, "gpuwatch: GPU ") || !strings.Contains(n.Reason, "State=RESUME") {
			t.Errorf("drain reason %q", n.Reason)
		}
		// The operator looks at the GPU and puts the node back.
		resume()
		return true
	}, "drained node "+node)
	// The second hardware fault (XID 94 at 100m) is seen in the cycle
	// that ends at it; the dry run records it once. Live at 2h, the same two
	// faults drain the node once; the resume is not answered until XID 79
	// and XID 95 come.
	want := []string{"1h40m0s:intended:5003", "1h40m0s:dry_run:5003", "2h0m0s:intended:5003", "2h0m0s:done:5003",
		"3h50m0s:intended:5005", "3h50m0s:done:5005"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("drain audit:\n got %v\nwant %v", got, want)
	}
	if len(drained) != 2 || !drained[2*time.Hour] || !drained[3*time.Hour+50*time.Minute] {
		t.Errorf("node drained after the cycles at %v, want +2h and +3h50m", drained)
	}
}

// useTestSlurm points the test's Slurm commands at the cluster of
// test/slurm/start.sh (GPUWATCH_SLURM_CONF) through SLURM_CONF. Setting it
// (t.Setenv) makes the test serial; where SLURM_CONF already names that
// cluster (scripts/test.sh and .ci/run eval start.sh, which exports both)
// there is nothing to set, and a test that may share the cluster
// (parallel) runs in parallel with the others.
func useTestSlurm(t *testing.T, parallel bool) {
	t.Helper()
	conf := os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(t, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	if parallel && os.Getenv("SLURM_CONF") == conf {
		t.Parallel()
		return
	}
	t.Setenv("SLURM_CONF", conf)
}

// slurmNode is the one node of test/slurm/start.sh's cluster.
func slurmNode(t *testing.T, sl *slurm.Client) string {
	t.Helper()
	out, err := exec.Command("sinfo", "--noheader", "--format=%n").Output()
	if err != nil {
		t.Fatalf("sinfo: %v", err)
	}
	name := strings.Fields(string(out))[0]
	if n, err := sl.Node(context.Background(), name); err != nil || n == nil || n.Drained() {
		t.Fatalf("node %s: %+v %v: want an up, undrained node", name, n, err)
	}
	return name
}
