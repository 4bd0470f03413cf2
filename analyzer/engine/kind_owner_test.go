package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestKindFromSlurmBatchFlag: two jobs named like training runs go idle
// with memory held after working. One is an salloc allocation (no batch
// script: an interactive session), one an sbatch script; real Slurm's batch
// flag, not the name, makes the first an idle_session and only the second
// stuck, and each finding says what decided its kind.
//
// Needs the cluster of test/slurm/start.sh (GPUWATCH_SLURM_CONF).
func TestKindFromSlurmBatchFlag(t *testing.T) {
	conf := os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(t, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	t.Setenv("SLURM_CONF", conf)
	out, err := exec.Command("salloc", "--no-shell", "--immediate=30", "--ntasks=1", "--time=10", "--job-name=train-job-7").CombinedOutput()
	m := regexp.MustCompile(`Granted job allocation ([0-9]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("salloc: %v: %s", err, out)
	}
	session := string(m[1])
	t.Cleanup(func() { _ = exec.Command("scancel", session).Run() })
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command("sbatch", "--parsable", "--hold", "--job-name=train-job-8", "--output=/dev/null", script).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	batch := strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]
	t.Cleanup(func() { _ = exec.Command("scancel", batch).Run() })

	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	sc, err := sim.ParseScenario("kinds.yaml", []byte(fmt.Sprintf(`
name: slurm-kinds
fleet:
  - hostname: node-a
    model: H100-SXM5-80GB
    gpus: 2
workloads:
  - {id: %q, user: ann, node: node-a, gpus: [0], start: 10m, duration: 6h, behaviour: stuck_idle}
  - {id: %q, user: bob, node: node-a, gpus: [1], start: 10m, duration: 6h, behaviour: stuck_idle}
`, session, batch)))
	if err != nil {
		t.Fatal(err)
	}
	_, found := slurmFindings(t, sc, config.Default(), origin, 6*time.Hour)
	if f, ok := found[session+"|"+string(schema.IdleSession)]; !ok || f.Kind != schema.KindInteractive || f.KindSource != facts.SlurmBatchFlag {
		t.Errorf("salloc session %s: idle_session %v kind %q from %q, want interactive from %q (findings %v)", session, ok, f.Kind, f.KindSource, facts.SlurmBatchFlag, keys(found))
	}
	if _, ok := found[session+"|"+string(schema.Stuck)]; ok {
		t.Errorf("salloc session %s judged stuck, as a batch job", session)
	}
	if f, ok := found[batch+"|"+string(schema.Stuck)]; !ok || f.Kind != schema.KindBatch {
		t.Errorf("sbatch job %s: stuck %v kind %q, want stuck batch (findings %v)", batch, ok, f.Kind, keys(found))
	}
}
