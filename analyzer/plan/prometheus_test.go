package plan

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// writeOpenMetrics writes the synthetic fleet of n GPUs over span at step
// as OpenMetrics for promtool's backfill.
func writeOpenMetrics(t testing.TB, path string, n int, from time.Time, span, step time.Duration) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	for mi, m := range []*schema.Metric{schema.ProfSMActive, schema.GPUUtil, schema.FBUsed, schema.FBFree} {
		fmt.Fprintf(w, "# TYPE %s gauge\n", m.Name)
		for off := time.Duration(0); off < span; off += step {
			ts := strconv.FormatInt(from.Add(off).Unix(), 10)
			for g := 0; g < n; g++ {
				job, sm, util, fb := fleetSample(g, off)
				v := []float64{sm, util, fb, 81559 - fb}[mi]
				host, idx := fmt.Sprintf("node-%04d", g/8), g%8
				fmt.Fprintf(w, `%s{UUID="GPU-%s-%d",gpu="%d",hostname="%s",modelName="NVIDIA H100 80GB HBM3"`, m.Name, host, idx, idx, host)
				if job != "" {
					fmt.Fprintf(w, `,hpc_job="%s"`, job)
				}
				fmt.Fprintf(w, "} %g %s\n", v, ts)
			}
		}
	}
	fmt.Fprintln(w, "# EOF")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// servePrometheus backfills the file and serves it with a real Prometheus.
func servePrometheus(t testing.TB, om string) string {
	t.Helper()
	promtool, prom := testtool.Need(t, "promtool"), testtool.Need(t, "prometheus")
	dir := filepath.Dir(om)
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=256h", om, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 60s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testtool.FreeAddr(t)
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=100y",
		"--web.listen-address="+addr, "--query.max-samples=500000000")
	cmd.Stdout, cmd.Stderr = nil, nil
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

// TestPrometheusFleetIndependent: through a real Prometheus the plan issues
// the same number of queries for a fleet four times larger, and its time
// grows no faster than the fleet (plus fixed costs).
func TestPrometheusFleetIndependent(t *testing.T) {
	if testtool.Race {
		t.Skip("timing ratios do not hold under the race detector; scripts/test.sh runs it in its non-race step")
	}
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 48 * time.Hour
	type run struct {
		gpus    int
		wall    time.Duration
		queries int64
	}
	var runs []run
	for _, n := range []int{40, 160} {
		om := filepath.Join(t.TempDir(), "fleet.om")
		writeOpenMetrics(t, om, n, from, span, 2*time.Minute)
		url := servePrometheus(t, om)
		c, err := promapi.New(url, promapi.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cq := &query.Counting{Q: c}
		// The first plan warms Prometheus' caches; the second is timed.
		if _, err := Build(context.Background(), c, from, from.Add(span), Options{}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p, err := Build(context.Background(), cq, from, from.Add(span), Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := run{n, time.Since(start), cq.Count()}
		runs = append(runs, r)
		t.Logf("PROM plan: %d GPUs × 48 h at 2 min: %s, %d queries; %s", n, r.wall.Round(time.Millisecond), r.queries, p.Headline())
		if p.Held != n {
			t.Errorf("%d GPUs held, want %d", p.Held, n)
		}
	}
	if runs[0].queries != runs[1].queries || runs[0].queries != Queries {
		t.Errorf("queries %d and %d for %d and %d GPUs, want %d both", runs[0].queries, runs[1].queries, runs[0].gpus, runs[1].gpus, Queries)
	}
	ratio := float64(runs[1].wall) / float64(runs[0].wall)
	t.Logf("PROM ratio: 4× the GPUs took %.2f× the time", ratio)
	if ratio > 6 {
		t.Errorf("4× the GPUs took %.1f× the time: worse than linear", ratio)
	}
}
