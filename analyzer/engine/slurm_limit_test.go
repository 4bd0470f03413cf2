package engine

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestOverlongBySlurmTimeLimit: overlong judges each batch job by the time
// limit its real Slurm reports (squeue --json), not by the configured
// maximum of its kind (here 2 h). Telemetry for the jobs' GPUs is
// simulated under their real job ids:
//   - a busy job with a 1 h limit is over the limit past that hour, and
//     those GPU-hours are its own total, not waste;
//   - a busy job with a 14-day limit runs 4 h and is not overlong, though
//     the configured maximum would call it so;
//   - an idle job past its 1 h limit is over the limit, and its idleness is
//     waste by cpu_only;
//   - a job Slurm does not know keeps the configured maximum.
//
// Needs the cluster of test/slurm/start.sh (GPUWATCH_SLURM_CONF), as .ci/run
// starts it.
func TestOverlongBySlurmTimeLimit(t *testing.T) {
	conf := os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(t, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	t.Setenv("SLURM_CONF", conf)
	dir := t.TempDir()
	submit := func(name, limit string) string {
		script := filepath.Join(dir, name+".sh")
		if err := os.WriteFile(script, []byte("#!/bin/sh\nwhile :; do sleep 1; done\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("sbatch", "--parsable", "--job-name="+name, "--time="+limit, "--output=/dev/null", script).CombinedOutput()
		if err != nil {
			t.Fatalf("sbatch: %v: %s", err, out)
		}
		id := strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]
		t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
		return id
	}
	busyShort, busyLong, idleShort := submit("busy-1h", "60"), submit("busy-14d", "14-00:00:00"), submit("idle-1h", "60")
	const unknown = "990001" // no such job in Slurm
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	sc, err := sim.ParseScenario("limits.yaml", []byte(fmt.Sprintf(`
name: slurm-limits
fleet:
  - hostname: node-a
    model: H100-SXM5-80GB
    gpus: 4
workloads:
  - {id: %q, user: ann, node: node-a, gpus: [0], start: 10m, duration: 4h, behaviour: training}
  - {id: %q, user: bob, node: node-a, gpus: [1], start: 10m, duration: 4h, behaviour: training}
  - {id: %q, user: cat, node: node-a, gpus: [2], start: 10m, duration: 4h, behaviour: cpu_only}
  - {id: %q, user: dan, node: node-a, gpus: [3], start: 10m, duration: 4h, behaviour: training}
`, busyShort, busyLong, idleShort, unknown)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Patterns.Overlong.MaxRuntime["batch"] = config.Duration(2 * time.Hour)
	a, found := slurmFindings(t, sc, cfg, origin, 4*time.Hour+30*time.Minute)
	over := func(job string, limitH, scheduler, overH float64) {
		t.Helper()
		f, ok := found[job+"|"+string(schema.Overlong)]
		switch {
		case !ok:
			t.Errorf("job %s: no overlong finding (findings %v)", job, keys(found))
		case f.Evidence["max_runtime_hours"] != limitH || f.Evidence["scheduler_time_limit"] != scheduler:
			t.Errorf("job %s judged by a %v h limit (scheduler's: %v), want %v h (%v)", job, f.Evidence["max_runtime_hours"],
				f.Evidence["scheduler_time_limit"], limitH, scheduler)
		case f.WastedGPUHours != 0 || math.Abs(f.Evidence["over_limit_gpu_hours"]-overH) > 0.1:
			t.Errorf("job %s: %v GPU-hours wasted, %v over the limit; want 0 and %v", job, f.WastedGPUHours, f.Evidence["over_limit_gpu_hours"], overH)
		}
	}
	over(busyShort, 1, 1, 3) // 10m..4h10m, limit at 1h10m
	over(idleShort, 1, 1, 3) // the same span, idle
	over(unknown, 2, 0, 2)   // the configured maximum: limit at 2h10m
	if f, ok := found[busyLong+"|"+string(schema.Overlong)]; ok {
		t.Errorf("job %s with a 14-day limit is overlong after 4 h: %+v", busyLong, f.Evidence)
	}
	if f, ok := found[idleShort+"|"+string(schema.CPUOnly)]; !ok || f.WastedGPUHours < 3.5 {
		t.Errorf("the idle job's waste is not cpu_only's: %+v", f)
	}
	// In the accounting: over the limit is its own total, the idle job's
	// hours are waste once.
	b := a.Book
	if al := b.Allocations["node-a|"+busyShort]; al == nil || al.Wasted != 0 || math.Abs(al.OverLimit-3) > 0.1 {
		t.Errorf("busy job's accounting %+v", al)
	}
	if al := b.Allocations["node-a|"+idleShort]; al == nil || al.Wasted < 3.5 || al.Wasted > al.Allocated || math.Abs(al.OverLimit-3) > 0.1 {
		t.Errorf("idle job's accounting %+v", al)
	}
	if math.Abs(b.OverLimit-8) > 0.3 {
		t.Errorf("over the limit in all: %.2f GPU-hours, want 3 + 3 + 2", b.OverLimit)
	}
}

func keys(m map[string]finding.Finding) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// slurmFindings replays sc from origin over span into an embedded store and
// analyzes it with the real Slurm of test/slurm/start.sh as the facts
// source (time limits, batch flags), returning the findings by
// "job|pattern" beside the whole analysis: the Slurm-backed engine tests'
// one way to judge.
func slurmFindings(t *testing.T, sc *sim.Scenario, cfg config.Config, origin time.Time, span time.Duration) (Analysis, map[string]finding.Finding) {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	app := db.Appender()
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 3, Origin: origin, To: span, Resolution: 30 * time.Second},
		func(ts time.Time, f []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, f) }); err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Querier: db, Config: cfg, Limits: &facts.SlurmSource{Runner: execrun.Exec{Timeout: 30 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(ctx, origin, origin.Add(span))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]finding.Finding{}
	for _, f := range a.Findings {
		found[f.Job+"|"+string(f.Pattern)] = f
	}
	return a, found
}
