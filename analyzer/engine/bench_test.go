package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
)

// The scale checks of issue 4 run only when GPUWATCH_BENCH=1: they take
// minutes and gigabytes, not the seconds of the normal test run.
func needBench(t *testing.T) {
	t.Helper()
	if os.Getenv("GPUWATCH_BENCH") == "" {
		t.Skip("set GPUWATCH_BENCH=1 to run the scale benchmarks")
	}
}

// fillWeek writes n GPUs × 7 days at 30s of the series the analyzer reads
// into db: every GPU runs one job a day, busy, idle, light or stuck in turn.
func fillWeek(t *testing.T, db *embedded.DB, n int, from time.Time, span time.Duration) int {
	t.Helper()
	type series struct {
		ref storage.SeriesRef
		l   labels.Labels
	}
	metrics := []*catalogue.Metric{catalogue.GPUUtil, catalogue.FBUsed, catalogue.FBFree, catalogue.PowerUsage,
		catalogue.PowerLimit, catalogue.ProfSMActive, catalogue.ProfDRAMActive}
	refs := map[string]*series{}
	rng := rand.New(rand.NewPCG(7, 11))
	total := 0
	ctx := context.Background()
	day := 24 * time.Hour
	app := db.TSDB().Appender(ctx)
	for off := time.Duration(0); off < span; off += 30 * time.Second {
		ts := from.Add(off).UnixMilli()
		d := int(off / day)
		for g := 0; g < n; g++ {
			host, idx := fmt.Sprintf("node-%04d", g/8), g%8
			job := strconv.Itoa(100000 + d*n + g)
			kind := (g + d) % 4
			inJob := off%day >= 30*time.Minute // 30 idle unallocated minutes a day
			var util, fb, pw, sm, dram float64
			switch {
			case !inJob || kind == 1:
				pw = 70
			case kind == 0:
				util, fb, pw, sm, dram = 90+10*rng.Float64(), 40000, 600, 0.75, 0.4
			case kind == 2:
				util, fb, pw, sm, dram = 10*rng.Float64(), 4000, 150, 0.07, 0.05
			default:
				if off%day < 3*time.Hour {
					util, fb, pw, sm, dram = 95, 40000, 600, 0.8, 0.4
				} else {
					fb, pw = 40000, 80
				}
			}
			vals := []float64{util, fb, 81920 - fb, pw, 700, sm, dram}
			for mi, m := range metrics {
				key := m.Name + "|" + host + "|" + strconv.Itoa(idx)
				if inJob {
					key += "|" + job
				}
				s := refs[key]
				if s == nil {
					b := labels.NewScratchBuilder(8)
					b.Add("__name__", m.Name)
					b.Add(catalogue.LabelUUID, fmt.Sprintf("GPU-%s-%d", host, idx))
					b.Add(catalogue.LabelGPU, strconv.Itoa(idx))
					b.Add(catalogue.LabelHostname, host)
					b.Add(catalogue.LabelModelName, "NVIDIA H100 80GB HBM3")
					if inJob {
						b.Add(catalogue.LabelHPCJob, job)
					}
					b.Sort()
					s = &series{l: b.Labels()}
					refs[key] = s
				}
				ref, err := app.Append(s.ref, s.l, ts, vals[mi])
				if err != nil {
					t.Fatal(err)
				}
				s.ref = ref
				total++
			}
		}
		if off%(time.Hour) == 0 {
			if err := app.Commit(); err != nil {
				t.Fatal(err)
			}
			app = db.TSDB().Appender(ctx)
			// Series of ended jobs are never appended to again.
			if off%day == 0 {
				refs = map[string]*series{}
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return total
}

// peakRSS reads the process' peak resident set (VmHWM) in bytes.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return -1
}

// TestBenchWeekEmbedded: a one-shot 7-day analysis of 1,000 GPUs at 30 s
// resolution from the embedded store. Targets: ≤ 60 s and ≤ 2 GiB RSS.
func TestBenchWeekEmbedded(t *testing.T) {
	needBench(t)
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("GPUWATCH_BENCH_GPUS")); err == nil && v > 0 {
		n = v
	}
	dir := t.TempDir()
	db, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 7 * 24 * time.Hour
	start := time.Now()
	samples := fillWeek(t, db, n, from, span)
	t.Logf("ingested %d samples (%d GPUs, 7 days at 30s) in %s", samples, n, time.Since(start).Round(time.Second))
	start = time.Now()
	if err := db.TSDB().Compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted and closed in %s", time.Since(start).Round(time.Second))
	runtime.GC()
	debug.FreeOSMemory()
	// Reset the peak RSS so that it measures the analysis alone.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset peak RSS (%v): the figure includes ingestion", err)
	}
	start = time.Now()
	db, err = embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := time.Since(start)
	e, err := New(Options{Querier: db, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	fs, err := e.Analyze(context.Background(), from, from.Add(span))
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	rss := peakRSS()
	t.Logf("BENCH week-embedded: %d GPUs, 7 days: open %s, analyze %s, %d findings, peak RSS %.2f GiB",
		n, opened.Round(time.Millisecond), wall.Round(time.Millisecond), len(fs), float64(rss)/(1<<30))
	if len(fs) == 0 {
		t.Error("no findings: the synthetic week has idle, light and stuck jobs")
	}
	if wall > 60*time.Second {
		t.Errorf("analysis took %s, target 60s", wall)
	}
	if rss > 2<<30 {
		t.Errorf("peak RSS %.2f GiB, target 2 GiB", float64(rss)/(1<<30))
	}
}
