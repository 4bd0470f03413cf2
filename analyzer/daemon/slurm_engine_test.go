package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The whole chain on a real Slurm: the simulator feeds idle telemetry for
// the GPUs of two real jobs (the scenario's hpc_job ids are theirs), the
// engine finds them cpu_only, and the escalation warns, signals (the job
// traps SIGUSR1) and cancels the one that is not exempt.
// Needs the cluster of test/slurm/start.sh (GPUWATCH_SLURM_CONF), as .ci/run
// starts it; test/reclaim holds the other Slurm tests.
func TestEngineOnRealSlurm(t *testing.T) {
	useTestSlurm(t, true)
	dir := t.TempDir()
	// The telemetry is the jobs' own: on their node, from after they
	// started (the target proof holds the scheduler to both).
	node := slurmNode(t, &slurm.Client{Runner: execrun.Exec{Timeout: 30 * time.Second}})
	slurm := &action.Slurm{Runner: execrun.Exec{Timeout: 30 * time.Second}}
	submit := func(name string) (string, string) { return testtool.SubmitSignalJob(t, dir, name) }
	idle, marker := submit("sim-idle")
	exempt, exemptMarker := submit("sim-exempt")
	scenario := fmt.Sprintf(`
name: reclaim-slurm
fleet:
  - hostname: %[3]s
    model: H100-SXM5-80GB
    gpus: 2
workloads:
  - {id: %[1]q, user: bob, account: dev-vision, node: %[3]s, gpus: [0], start: 0s, duration: 10h, behaviour: cpu_only}
  - {id: %[2]q, user: carol, account: dev-nlp, node: %[3]s, gpus: [1], start: 0s, duration: 10h, behaviour: cpu_only}
`, idle, exempt, node)
	step := config.Default().Step.D()
	origin := time.Now().UTC().Truncate(step).Add(step)
	r, d := engineRigFor(t, scenario, origin, 0, 0)
	r.esc.Actuators["slurm"] = slurm
	// The real scheduler is the owner here: its partition (debug) and the
	// job id decide, not the scenario's accounts.
	pol, err := policy.Parse([]byte(strings.NewReplacer("accounts: [prod-*]", "partitions: [prod]", "accounts: [dev-*]", "partitions: [debug]",
		"{user: carol}", fmt.Sprintf("{job: %q}", exempt)).Replace(enginePolicy)))
	if err != nil {
		t.Fatal(err)
	}
	r.esc.Policy = pol
	r.esc.Facts = &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: execrun.Exec{Timeout: 30 * time.Second}}}}
	var checkpointed, cancelled time.Duration
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5*time.Hour + 30*time.Minute)); now = now.Add(5 * time.Minute) {
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(context.Background()); err != nil {
			t.Fatalf("cycle at %s: %v", now.Sub(origin), err)
		}
		if b, _ := os.ReadFile(marker); checkpointed == 0 && len(b) > 0 {
			checkpointed = now.Sub(origin)
		}
		if st, _ := slurm.JobState(context.Background(), idle); cancelled == 0 && st != "RUNNING" {
			cancelled = now.Sub(origin)
		}
	}
	// The signal is delivered asynchronously: wait for the marker.
	for deadline := time.Now().Add(10 * time.Second); checkpointed == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(marker); len(b) > 0 {
			checkpointed = -1
		}
	}
	if checkpointed == 0 {
		t.Fatal("the idle job never received SIGUSR1")
	}
	if cancelled != 5*time.Hour {
		t.Fatalf("idle job cancelled at +%s, want +5h (found at 2h, reclaim 3h later)", cancelled)
	}
	if st, _ := slurm.JobState(context.Background(), exempt); st != "RUNNING" {
		t.Fatalf("exempt job is %s", st)
	}
	if b, _ := os.ReadFile(exemptMarker); len(b) > 0 {
		t.Fatalf("exempt job signalled")
	}
	evs, _ := r.log.Events(context.Background(), audit.Filter{Job: idle})
	var got []string
	for _, e := range evs {
		got = append(got, e.Step+":"+string(e.State))
	}
	if want := "warn:intended warn:done checkpoint:intended checkpoint:done reclaim:intended reclaim:done"; strings.Join(got, " ") != want {
		t.Fatalf("audit = %v, want %s", got, want)
	}
}
