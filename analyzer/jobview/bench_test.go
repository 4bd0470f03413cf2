package jobview_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// weekJob is one 8-GPU job running for weekHours(), scraped every 30s.
const weekJob = `
name: week
fleet: [{hostname: node-w, model: H100-SXM5-80GB, gpus: 8}]
workloads:
  - {id: "7001", user: alice, team: vision, node: node-w, gpus: [0, 1, 2, 3, 4, 5, 6, 7], start: 0s, duration: %dh, behaviour: partial_gpus, params: {idle_gpus: 3}}
`

// weekHours is the job's length: 7 days, or under -race, where the CPU
// bound is not held and the week's replay alone takes most of a minute, a
// day (the reduced size), so the same path is still race-checked;
// scripts/test.sh runs the week again without -race.
func weekHours() int {
	if testtool.Race {
		return 24
	}
	return 7 * 24
}

// weekBlocks writes the week job's replay as Prometheus blocks into data
// (promtool's backfill of the OpenMetrics the simulator's collections make).
func weekBlocks(data string) error {
	sc, err := sim.ParseScenario("week", []byte(fmt.Sprintf(weekJob, weekHours())))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "gpuwatch-week-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	om := simload.NewOpenMetrics(tmp)
	if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: 1, Origin: origin, From: 0, To: time.Duration(weekHours()) * time.Hour,
		Resolution: 30 * time.Second, Extra: []*schema.Metric{schema.TotalEnergy, schema.JobCPUSeconds}}, om.Sink); err != nil {
		return err
	}
	file := filepath.Join(tmp, "week.om")
	if err := om.Close(file); err != nil {
		return err
	}
	if out, err := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=256h", file, data).CombinedOutput(); err != nil {
		return fmt.Errorf("promtool: %w\n%s", err, out)
	}
	return nil
}

// weekProm backfills the week into a real Prometheus (promtool) and
// returns its URL.
func weekProm(t testing.TB) (string, int) {
	t.Helper()
	testtool.Need(t, "promtool")
	testtool.Need(t, "prometheus")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal(err)
	}
	r := testtool.Replay{Name: fmt.Sprintf("jobview-week-%dh", weekHours()),
		Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"},
		Files:    []string{"analyzer/jobview/bench_test.go", promtool}}
	if _, err := testtool.CachedReplay(t, r, data, func(data string) error { return weekBlocks(data) }); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 30s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testtool.FreeAddr(t)
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=100y", "--web.listen-address="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, cmd.Process.Pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus not ready")
		}
	}
}

func weekView(t testing.TB, url string) (*jobview.Report, time.Duration) {
	c, err := promapi.New(url, promapi.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := jobview.ParseRef("7001")
	start := time.Now()
	r, err := jobview.Build(context.Background(), jobview.Options{Querier: c, Now: origin.Add(8 * 24 * time.Hour)}, ref)
	if err != nil {
		t.Fatal(err)
	}
	return r, time.Since(start)
}

// cpuSeconds is the CPU time used so far by this process and by pid.
func cpuSeconds(pid int) float64 {
	return (testtool.CPUTime() + testtool.ProcessCPU(pid)).Seconds()
}

// A 7-day, 8-GPU job answers in at most a second from a real Prometheus:
// the CPU time the view costs, Prometheus' and ours together, is at most a
// second (on a machine shared with other work the wall time also depends
// on the neighbours, so it is logged, as a median of 5 full views over
// HTTP with the default 30-day lookback, and not held to a bound).
func TestWeekJobUnderASecond(t *testing.T) {
	url, pid := weekProm(t)
	weekView(t, url) // Prometheus loads the blocks' index on first use
	var took []time.Duration
	var cpu []float64
	var r *jobview.Report
	for range 5 {
		var d time.Duration
		c0 := cpuSeconds(pid)
		r, d = weekView(t, url)
		cpu = append(cpu, cpuSeconds(pid)-c0)
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	sort.Float64s(cpu)
	t.Logf("%d-hour 8-GPU job view from a real Prometheus: CPU median %.3fs (Prometheus and client), wall median %s (min %s, max %s)",
		weekHours(), cpu[2], took[2], took[0], took[4])
	if len(r.GPUs) != 8 || r.DurationHours < float64(weekHours())-0.1 || len(r.Findings) == 0 || r.CPU == nil || r.GPUs[0].EnergyFrom != "counter" {
		t.Fatalf("view: %d GPUs, %.1f h, %d findings, cpu %v", len(r.GPUs), r.DurationHours, len(r.Findings), r.CPU)
	}
	if testtool.Race {
		// The race detector slows the client several times over; the bound
		// is held by the non-race scale step of scripts/test.sh.
		t.Logf("built with -race: the 1 CPU-second bound is checked without it")
		return
	}
	// The target is a CPU-second; CPU time too grows on a slower or busier
	// machine of the same kind (shared caches, lower clocks), so the bound
	// that fails is the target with half again as margin, and the figure is
	// printed either way.
	const target, ceiling = 1.0, 1.5
	if cpu[2] > target {
		t.Logf("a view costs %.3f CPU-seconds (median), over the %.0f s target (the test fails above %.1f)", cpu[2], target, ceiling)
	}
	if cpu[2] > ceiling {
		t.Errorf("a view costs %.3f CPU-seconds (median), want at most %.1f (target %.0f)", cpu[2], ceiling, target)
	}
}

func BenchmarkWeekJob(b *testing.B) {
	url, _ := weekProm(b)
	weekView(b, url)
	b.ResetTimer()
	for range b.N {
		weekView(b, url)
	}
}
