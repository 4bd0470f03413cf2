package facts_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// countingRunner counts scheduler calls.
type countingRunner struct {
	mu    sync.Mutex
	calls []string
	r     execrun.Runner
}

func (c *countingRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	c.mu.Lock()
	c.calls = append(c.calls, name+" "+strings.Join(args, " "))
	c.mu.Unlock()
	return c.r.Run(ctx, name, args...)
}

// cluster needs the Slurm of test/slurm/start.sh, as .ci/run starts it.
func cluster(tb testing.TB) {
	tb.Helper()
	conf := os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(tb, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	tb.Setenv("SLURM_CONF", conf)
	if exec.Command("scontrol", "show", "partition", "dev").Run() != nil {
		if out, err := exec.Command("scontrol", "create", "PartitionName=dev", "Nodes=ALL", "State=UP").CombinedOutput(); err != nil &&
			exec.Command("scontrol", "show", "partition", "dev").Run() != nil {
			tb.Fatalf("create partition dev: %v: %s", err, out)
		}
	}
}

// held submits n held jobs (pending, holding nothing) in partition dev.
func held(tb testing.TB, n int, names func(i int) string) []string {
	tb.Helper()
	script := filepath.Join(tb.TempDir(), "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 600\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		out, err := exec.Command("sbatch", "--parsable", "--hold", "--partition=dev", "--job-name="+names(i), "--output=/dev/null", script).CombinedOutput()
		if err != nil {
			tb.Fatalf("sbatch: %v: %s", err, out)
		}
		ids[i] = strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]
	}
	tb.Cleanup(func() { _ = exec.Command("scancel", ids...).Run() })
	return ids
}

// findingsOn makes n findings spread over the jobs (several hosts and
// patterns per job), plus findings of jobs Slurm never had.
func findingsOn(ids []string, n int) []finding.Finding {
	pats := []schema.Pattern{schema.CPUOnly, schema.Stuck, schema.LowUtilization, schema.Overlong}
	fs := make([]finding.Finding, 0, n)
	for i := 0; len(fs) < n; i++ {
		job := "99999990"
		if i%10 != 0 {
			job = ids[i%len(ids)]
		}
		fs = append(fs, finding.Finding{Pattern: pats[i%len(pats)], Job: job, Hostname: fmt.Sprintf("node%d", i%7), Scheduler: "slurm"})
	}
	return fs
}

// TestSlurmFacts: one squeue call answers for every job; a job name built
// to look like JSON and another job's fields changes nothing but its name;
// a job Slurm does not know has its facts missing, not empty.
func TestSlurmFacts(t *testing.T) {
	cluster(t)
	hostile := "evil\n{\"job_id\":1,\"partition\":\"prod\"} PARTITION=prod|prod"
	ids := held(t, 2, func(i int) string { return []string{"plain", hostile}[i] })
	r := &countingRunner{r: execrun.Exec{Timeout: 10 * time.Second}}
	res := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: r}}}
	fs := []finding.Finding{{Job: ids[0], Scheduler: "slurm"}, {Job: ids[1], Scheduler: "slurm"}, {Job: "99999991", Scheduler: "slurm"}}
	got := res.Resolve(context.Background(), fs)
	if len(r.calls) != 1 {
		t.Fatalf("scheduler calls = %v, want one", r.calls)
	}
	for i, wantName := range []string{"plain", hostile} {
		for a, want := range map[schema.Attr]string{schema.AttrPartition: "dev", schema.AttrJobName: wantName, schema.AttrUser: "root", schema.AttrKind: "batch"} {
			if v, ok, why := got[i].Value(a); !ok || v != want {
				t.Errorf("job %s %s = %q (%v, %s), want %q", ids[i], a, v, ok, why, want)
			}
		}
		if got[i].State != "PENDING" {
			t.Errorf("job %s state %q", ids[i], got[i].State)
		}
		if _, _, why := got[i].Value(schema.AttrTeam); !strings.Contains(why, "teams file") {
			t.Errorf("team without a teams file: %q, want missing", why)
		}
	}
	if _, ok, why := got[2].Value(schema.AttrPartition); ok || !strings.Contains(why, "gone") {
		t.Errorf("unknown job: partition ok=%v why=%q, want missing (gone)", ok, why)
	}
	if !got[2].Gone || got[0].Gone {
		t.Errorf("Gone: unknown job %v, known job %v; want true, false", got[2].Gone, got[0].Gone)
	}
	// squeue failing: every Slurm fact missing, naming the error, and the
	// job not taken for gone (the scheduler never answered).
	down := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: r, Squeue: "/bin/false"}}}
	failed := down.Resolve(context.Background(), fs[:1])[0]
	if _, ok, why := failed.Value(schema.AttrPartition); ok || !strings.Contains(why, "squeue") || failed.Gone {
		t.Errorf("squeue down: ok=%v why=%q gone=%v", ok, why, failed.Gone)
	}
}

// The scale target: 1,000 findings over 200 real jobs (and some gone) take
// at most 2 scheduler calls and at most 1 s of CPU, the resolver's and the
// scheduler commands' (CPU, not wall time: a busy machine stretches the
// wall time of the same work).
func TestSlurmFactsAtScale(t *testing.T) {
	cluster(t)
	ids := held(t, 200, func(i int) string { return fmt.Sprintf("scale-%d", i) })
	fs := findingsOn(ids, 1000)
	r := &countingRunner{r: execrun.Exec{Timeout: 10 * time.Second}}
	res := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: r}}}
	start, cpu0 := time.Now(), testtool.CPUTime()+testtool.ChildrenCPUTime()
	got := res.Resolve(context.Background(), fs)
	took, cpu := time.Since(start), testtool.CPUTime()+testtool.ChildrenCPUTime()-cpu0
	t.Logf("1,000 findings over 200 jobs: %d scheduler calls, %s of CPU, %s of wall", len(r.calls), cpu.Round(time.Millisecond), took.Round(time.Millisecond))
	if len(r.calls) > 2 || cpu > time.Second {
		t.Fatalf("1,000 findings over 200 jobs: %d scheduler calls, %s of CPU; target at most 2 and 1 s", len(r.calls), cpu)
	}
	known := 0
	for i, fa := range got {
		if v, ok, _ := fa.Value(schema.AttrPartition); ok && v == "dev" {
			known++
		} else if fs[i].Job != "99999990" {
			t.Fatalf("job %s: no partition", fs[i].Job)
		}
	}
	t.Logf("1,000 findings over 200 jobs: %d scheduler call(s), %s, %d with facts", len(r.calls), took, known)
}

func BenchmarkSlurmFacts(b *testing.B) {
	cluster(b)
	ids := held(b, 200, func(i int) string { return fmt.Sprintf("bench-%d", i) })
	fs := findingsOn(ids, 1000)
	r := &countingRunner{r: execrun.Exec{Timeout: 10 * time.Second}}
	res := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: r}}}
	b.ResetTimer()
	for b.Loop() {
		res.Resolve(context.Background(), fs)
	}
	b.ReportMetric(float64(len(r.calls))/float64(b.N), "calls/op")
}
