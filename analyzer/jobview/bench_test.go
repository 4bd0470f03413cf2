package jobview_test

import (
	"context"
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
	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// weekJob is one 8-GPU job running for 7 days, scraped every 30s.
const weekJob = `
name: week
fleet: [{hostname: node-w, model: H100-SXM5-80GB, gpus: 8}]
workloads:
  - {id: "7001", user: alice, team: vision, node: node-w, gpus: [0, 1, 2, 3, 4, 5, 6, 7], start: 0s, duration: 168h, behaviour: partial_gpus, params: {idle_gpus: 3}}
`

// weekProm backfills the week into a real Prometheus (promtool) and
// returns its URL.
func weekProm(t testing.TB) string {
	t.Helper()
	testtool.Need(t, "promtool")
	testtool.Need(t, "prometheus")
	sc, err := sim.ParseScenario("week", []byte(weekJob))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	om := simload.NewOpenMetrics(dir)
	if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: 1, Origin: origin, From: 0, To: 168 * time.Hour,
		Resolution: 30 * time.Second, Extra: []*catalogue.Metric{catalogue.TotalEnergy, catalogue.JobCPUSeconds}}, om.Sink); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "week.om")
	if err := om.Close(file); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=256h", file, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	os.Remove(file)
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
				return url
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

// A 7-day, 8-GPU job answers in at most a second from a real Prometheus
// (median of 5 full views over HTTP, the default 30-day lookback).
func TestWeekJobUnderASecond(t *testing.T) {
	url := weekProm(t)
	weekView(t, url) // Prometheus loads the blocks' index on first use
	var took []time.Duration
	var r *jobview.Report
	for range 5 {
		var d time.Duration
		r, d = weekView(t, url)
		took = append(took, d)
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("7-day 8-GPU job view from Prometheus: median %s (min %s, max %s)", took[2], took[0], took[4])
	if len(r.GPUs) != 8 || r.DurationHours < 167.9 || len(r.Findings) == 0 || r.CPU == nil || r.GPUs[0].EnergyFrom != "counter" {
		t.Fatalf("view: %d GPUs, %.1f h, %d findings, cpu %v", len(r.GPUs), r.DurationHours, len(r.Findings), r.CPU)
	}
	if took[2] > time.Second {
		t.Errorf("median %s, want at most 1s", took[2])
	}
}

func BenchmarkWeekJob(b *testing.B) {
	url := weekProm(b)
	weekView(b, url)
	b.ResetTimer()
	for range b.N {
		weekView(b, url)
	}
}
