package facts_test

import (
	"context"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/schema"
)

var granted = regexp.MustCompile(`Granted job allocation ([0-9]+)`)

// allocation makes an salloc allocation with no shell and no batch script,
// as an interactive session has, named name.
func allocation(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("salloc", "--no-shell", "--immediate=30", "--partition=dev", "--ntasks=1",
		"--time=5", "--job-name="+name).CombinedOutput()
	m := granted.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("salloc: %v: %s", err, out)
	}
	id := string(m[1])
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	return id
}

// TestSlurmKindFromBatchFlag: real Slurm says which allocations have no
// batch script. An salloc session named like a training job is interactive
// by the flag; an sbatch script with the same kind of name is batch by the
// flag; an sbatch script a name rule calls interactive (Open OnDemand's
// apps are sbatch scripts) is interactive by its name.
func TestSlurmKindFromBatchFlag(t *testing.T) {
	cluster(t)
	session := allocation(t, "train-job-7")
	scripts := held(t, 2, func(i int) string { return []string{"train-job-8", "interactive-notebook"}[i] })
	res := &facts.Resolver{Sources: map[string]facts.Source{
		schema.SchedulerSlurm: &facts.SlurmSource{Runner: execrun.Exec{Timeout: 10 * time.Second}}}}
	fs := []finding.Finding{
		{Pattern: schema.Stuck, Job: session, Scheduler: schema.SchedulerSlurm},
		{Pattern: schema.Stuck, Job: scripts[0], Scheduler: schema.SchedulerSlurm},
		{Pattern: schema.Stuck, Job: scripts[1], Scheduler: schema.SchedulerSlurm},
	}
	got := res.Resolve(context.Background(), fs)
	want := []struct{ kind, source string }{
		{schema.KindInteractive, facts.SlurmBatchFlag},
		{schema.KindBatch, facts.SlurmBatchFlag},
		{schema.KindInteractive, facts.KindFromName},
	}
	for i, w := range want {
		k, ok, why := got[i].Value(schema.AttrKind)
		if !ok || k != w.kind || got[i].KindSource != w.source {
			t.Errorf("job %s: kind %q (%v %s) from %q, want %q from %q", fs[i].Job, k, ok, why, got[i].KindSource, w.kind, w.source)
		}
	}
}
