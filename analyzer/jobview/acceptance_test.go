package jobview_test

import (
	"context"
	"fmt"
	"os/user"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// A real Slurm job, mapped to its GPUs by the shipped prolog, on a
// simulated node served by the real collector and scraped every second by
// a real Prometheus: every figure of the job view equals what PromQL
// returns for the window the view reports, written here independently
// (per GPU by UUID, no aggregation), and the window is the first and last
// raw sample of the job's series.
func TestJobViewMatchesPromQL(t *testing.T) {
	t.Parallel()
	_, mapDir := slurmEnv(t)
	id, gpus := submit(t, "jobview-train", "sleep 300")
	prom := startScraping(t, startExporter(t, id, gpus, mapDir))
	// The job trains long enough to be seen for more than the 10 s the
	// window must span (below), every second on each GPU.
	awaitJobData(t, prom, id, len(gpus), 10, 11*time.Second)
	run(t, "scancel", id)
	c, err := promapi.New(prom, promapi.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The epilog unmaps the GPUs; the series lose the job: Prometheus
	// marks the job's series stale at the first scrape without them, while
	// the node's GPUs are still scraped (a failed scrape marks them all).
	testtool.Eventually(t, 60*time.Second, "job "+id+"'s series stale after scancel, the node's scraped", func() (bool, error) {
		now := time.Now()
		job, err := c.Query(context.Background(), schema.FBUsed.Name+`{hpc_job="`+id+`"}`, now)
		if err != nil {
			return false, err
		}
		node, err := c.Query(context.Background(), schema.FBUsed.Name, now)
		if err != nil {
			return false, err
		}
		return len(job.(model.Vector)) == 0 && len(node.(model.Vector)) > 0, nil
	})
	ref, err := jobview.ParseRef(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Step = config.Duration(5 * time.Second)
	now := time.Now()
	slurm := &jobview.Slurm{Runner: execrun.Exec{Timeout: 10 * time.Second}}
	sched, err := slurm.Job(context.Background(), id)
	if err != nil || sched == nil {
		t.Fatalf("scontrol: %v %v", sched, err)
	}
	r, err := jobview.Build(context.Background(), jobview.Options{Querier: c, Config: cfg, Now: now, Lookback: 10 * time.Minute, Points: 5, Scheduler: sched}, ref)
	if err != nil {
		t.Fatal(err)
	}

	// The window: the job's raw samples, read as a range vector.
	v, err := c.Query(context.Background(), schema.FBUsed.Name+`{hpc_job="`+id+`"}[10m]`, now)
	if err != nil {
		t.Fatal(err)
	}
	var first, last model.Time
	samples := map[string]int{}
	for _, ss := range v.(model.Matrix) {
		samples[string(ss.Metric[schema.LabelUUID])] += len(ss.Values)
		for _, p := range ss.Values {
			if first == 0 || p.Timestamp < first {
				first = p.Timestamp
			}
			last = max(last, p.Timestamp)
		}
	}
	if !r.Start.Equal(first.Time()) || !r.End.Equal(last.Time()) {
		t.Fatalf("window %s..%s, raw samples %s..%s", r.Start, r.End, first.Time(), last.Time())
	}
	if d := r.End.Sub(r.Start); d < 10*time.Second {
		t.Fatalf("job seen for %s only", d)
	}
	me, _ := user.Current()
	if r.User != me.Username || r.Account != "physics" || r.JobName != "jobview-train" || r.Scheduler != "slurm" {
		t.Errorf("owner %q account %q name %q scheduler %q", r.User, r.Account, r.JobName, r.Scheduler)
	}
	if len(r.GPUs) != len(gpus) {
		t.Fatalf("%d GPUs in the view, Slurm gave %v", len(r.GPUs), gpus)
	}
	for i, g := range r.GPUs {
		if g.Index != fmt.Sprint(gpus[i]) {
			t.Errorf("GPU %d is index %s, Slurm gave %v", i, g.Index, gpus)
		}
	}
	w := fmt.Sprintf("[%dms]", r.End.Sub(r.Start).Milliseconds()+1)
	if r.Window != model.Duration(r.End.Sub(r.Start)+time.Millisecond).String() {
		t.Errorf("window %q", r.Window)
	}
	checked := 0
	check := func(what string, got *float64, expr string) {
		t.Helper()
		want, ok := scalar(t, c, expr, r.End)
		switch {
		case !ok && got != nil:
			t.Errorf("%s = %v, PromQL %s has no value", what, *got, expr)
		case ok && got == nil:
			t.Errorf("%s missing, PromQL %s = %v", what, expr, want)
		case ok && !near(*got, want):
			t.Errorf("%s = %v, PromQL %s = %v", what, *got, expr, want)
		case ok:
			checked++
		}
	}
	for _, g := range r.GPUs {
		sel := fmt.Sprintf(`{hpc_job=%q,UUID=%q}`, id, g.UUID)
		f := func(fn string, m *schema.Metric) string { return fn + "(" + m.Name + sel + w + ")" }
		if g.Samples != samples[g.UUID] {
			t.Errorf("GPU %s: %d samples, raw %d", g.UUID, g.Samples, samples[g.UUID])
		}
		check(g.UUID+" util mean", g.UtilMean, f("avg_over_time", schema.GPUUtil))
		check(g.UUID+" util peak", g.UtilPeak, f("max_over_time", schema.GPUUtil))
		check(g.UUID+" SM mean", g.SMActiveMean, f("avg_over_time", schema.ProfSMActive))
		check(g.UUID+" SM peak", g.SMActivePeak, f("max_over_time", schema.ProfSMActive))
		check(g.UUID+" memory peak", g.MemPeakMiB, f("max_over_time", schema.FBUsed))
		check(g.UUID+" memory total", g.MemTotalMiB, f("max_over_time", schema.FBUsed)+" + "+f("min_over_time", schema.FBFree))
		check(g.UUID+" memory share", g.MemPeakShare, f("max_over_time", schema.FBUsed)+" / ("+f("max_over_time", schema.FBUsed)+" + "+f("min_over_time", schema.FBFree)+")")
		check(g.UUID+" power", g.PowerMeanW, f("avg_over_time", schema.PowerUsage))
		check(g.UUID+" energy", g.EnergyKWh, f("increase", schema.TotalEnergy)+" / 3.6e9")
		if g.EnergyFrom != "counter" || g.Coverage < 0.8 {
			t.Errorf("GPU %s: energy from %q, coverage %.2f", g.UUID, g.EnergyFrom, g.Coverage)
		}
		if *g.UtilMean < 30 || *g.MemPeakMiB < 1024 {
			t.Errorf("GPU %s: the training job shows util %.1f%%, memory %.0f MiB", g.UUID, *g.UtilMean, *g.MemPeakMiB)
		}
	}
	if r.CPU == nil {
		t.Fatal("no CPU figures")
	}
	check("cpu seconds", &r.CPU.Seconds, `increase(`+schema.JobCPUSeconds.Name+`{job_id="`+id+`"}`+w+`)`)
	wantCores := r.CPU.Seconds / r.End.Sub(r.Start).Seconds()
	check("cpu cores", &wantCores, `increase(`+schema.JobCPUSeconds.Name+`{job_id="`+id+`"}`+w+`) / `+fmt.Sprint(r.End.Sub(r.Start).Seconds()))
	if r.CPU.Allocated != sched.CPUs || r.CPU.Efficiency == nil || !near(*r.CPU.Efficiency, r.CPU.MeanCores/float64(sched.CPUs)) {
		t.Errorf("cpu allocated %d (slurm %d), efficiency %v", r.CPU.Allocated, sched.CPUs, r.CPU.Efficiency)
	}
	if r.NotEnoughData != "" {
		t.Errorf("not enough data: %s", r.NotEnoughData)
	}
	if checked < 9*len(gpus)+2 {
		t.Errorf("only %d figures compared", checked)
	}
	var b strings.Builder
	if err := jobview.Text(&b, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
}
