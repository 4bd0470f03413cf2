package plan

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// prometheusVersion is the first line of `prometheus --version`.
func prometheusVersion(t testing.TB) string {
	out, err := execOutput(testtool.Need(t, "prometheus"), "--version")
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(out, "\n")
	return line
}

// dirSize is the bytes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestPrometheusScale: a plan over 7 days × 10,000 GPUs at 60 s (the
// dcgm-exporter default interval; 403 million samples of SM activity,
// util and framebuffer used and free) from a real Prometheus, with the
// fixed query count, within 2 GiB, and within the target of 60 s on 2
// cores held as a ratio to a calibration measured in the same run (see
// calibrate and promScaleCPU): packages test side by side and other work
// may share the machine, so an absolute bound that one machine meets fails
// on the next. The blocks are written with the TSDB library and served by
// the prometheus binary.
func TestPrometheusScale(t *testing.T) {
	if testtool.Race {
		t.Skip("timing targets do not hold under the race detector; scripts/test.sh runs it in its non-race step")
	}
	const n = 10000
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 7 * 24 * time.Hour
	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	samples := writeFleetBlocks(t, data, n, from, span, time.Minute)
	t.Logf("wrote %d samples (%.2f GiB of blocks) in %s", samples, float64(dirSize(data))/(1<<30), time.Since(start).Round(time.Second))
	ps := startPrometheus(t, data)
	// The bound is the ratio to the calibration below, not this timeout.
	c, err := promapi.New(ps.URL, promapi.Options{Timeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	cal := calibrate(t, c, ps.cpu, from, from.Add(span))
	// The peak RSS is the plan's, not the block writing's or calibration's.
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset peak RSS (%v): the figure includes writing the blocks", err)
	}
	cq := &query.Counting{Q: c}
	cpu0, pcpu0 := cpuTime(), ps.cpu()
	start = time.Now()
	p, err := Build(context.Background(), cq, from, from.Add(span), Options{})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	cpu, pcpu := cpuTime()-cpu0, ps.cpu()-pcpu0
	rss := testtool.PeakRSS()
	t.Logf("SCALE plan-prometheus: %d GPUs × 7 days at 60s from %s: %s wall, CPU %s planner + %s Prometheus, %d queries, planner peak RSS %.2f GiB; %s",
		n, prometheusVersion(t), wall.Round(time.Millisecond), cpu.Round(time.Millisecond), pcpu.Round(time.Millisecond),
		cq.Count(), float64(rss)/(1<<30), p.Headline())
	if cq.Count() != Queries {
		t.Errorf("%d queries, want %d", cq.Count(), Queries)
	}
	if p.Seen != n || p.Held != n || p.Unknown != 0 {
		t.Errorf("seen %d, held %d, unknown %d GPUs; want %d, %d, 0", p.Seen, p.Held, p.Unknown, n, n)
	}
	if p.Needed >= p.Held {
		t.Errorf("needed %d of %d held: the light quarter should pack", p.Needed, p.Held)
	}
	// The target is 60 s of wall time on a 2-core machine; a 2-core machine
	// of the same kind measured both the plan and the calibration, and the
	// bounds hold the ratios to the calibration, with a margin for noise:
	// a plan that read the week more times, or with a dearer function,
	// fails on any machine. See promScaleWall.
	t.Logf("SCALE target 60 s wall: %s here (informational; the ratio below is held)", wall.Round(time.Millisecond))
	within(t, "plan wall", wall, cal.wall, promScaleWall)
	within(t, "plan CPU (planner and Prometheus)", cpu+pcpu, cal.cpu, promScaleCPU)
	if rss > 2<<30 {
		t.Errorf("planner peak RSS %.2f GiB, target 2 GiB", float64(rss)/(1<<30))
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
		cpu     time.Duration
		queries int64
	}
	var runs []run
	for _, n := range []int{100, 400} {
		data := filepath.Join(t.TempDir(), "data")
		writeFleetBlocks(t, data, n, from, span, time.Minute)
		ps := startPrometheus(t, data)
		c, err := promapi.New(ps.URL, promapi.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		cq := &query.Counting{Q: c}
		// The first plan warms Prometheus' caches; the second is measured.
		if _, err := Build(context.Background(), c, from, from.Add(span), Options{}); err != nil {
			t.Fatal(err)
		}
		cpu0, pcpu0 := cpuTime(), ps.cpu()
		p, err := Build(context.Background(), cq, from, from.Add(span), Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := run{n, cpuTime() - cpu0 + ps.cpu() - pcpu0, cq.Count()}
		runs = append(runs, r)
		t.Logf("PROM plan: %d GPUs × 48 h at 60 s: %s CPU (planner and Prometheus), %d queries; %s", n, r.cpu.Round(time.Millisecond), r.queries, p.Headline())
		if p.Held != n {
			t.Errorf("%d GPUs held, want %d", p.Held, n)
		}
	}
	if runs[0].queries != runs[1].queries || runs[0].queries != Queries {
		t.Errorf("queries %d and %d for %d and %d GPUs, want %d both", runs[0].queries, runs[1].queries, runs[0].gpus, runs[1].gpus, Queries)
	}
	ratio := float64(runs[1].cpu) / float64(runs[0].cpu)
	t.Logf("PROM ratio: 4× the GPUs took %.2f× the CPU", ratio)
	if ratio > 6 {
		t.Errorf("4× the GPUs took %.1f× the CPU: worse than linear", ratio)
	}
}
