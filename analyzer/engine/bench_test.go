package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/calibrate"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// benchSize is the size a scale test runs at: full, or small under -race.
// The targets hold for the production build; the race detector slows the
// code several times over, so under -race the same path runs at a size that
// checks it for data races, and the targets are not asserted (scripts/test.sh
// runs the scale tests again without -race, where they are).
func benchSize(t *testing.T, full, small int, env string) (n int, timed bool) {
	t.Helper()
	if v, err := strconv.Atoi(os.Getenv(env)); err == nil && v > 0 {
		return v, !testtool.Race
	}
	if testtool.Race {
		t.Logf("race detector on: %d instead of %d, targets not asserted", small, full)
		return small, false
	}
	return full, true
}

// fillWeek writes n GPUs × 7 days at 30s of the series the analyzer reads
// into db: every GPU runs one job a day, busy, idle, light or stuck in turn.
func fillWeek(t *testing.T, db *embedded.DB, n int, from time.Time, span time.Duration) int {
	t.Helper()
	type series struct {
		ref storage.SeriesRef
		l   labels.Labels
	}
	metrics := []*schema.Metric{schema.GPUUtil, schema.FBUsed, schema.FBFree, schema.PowerUsage,
		schema.PowerLimit, schema.ProfSMActive, schema.ProfDRAMActive}
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
					b.Add(schema.LabelUUID, fmt.Sprintf("GPU-%s-%d", host, idx))
					b.Add(schema.LabelGPU, strconv.Itoa(idx))
					b.Add(schema.LabelHostname, host)
					b.Add(schema.LabelModelName, "NVIDIA H100 80GB HBM3")
					if inJob {
						b.Add(schema.LabelHPCJob, job)
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

// The scale tests' bounds as multiples of the calibration (the CPU time of
// one simple pass over the same samples, the median of three, measured in
// the same test: calibrate.Measure). Measured on the 2-core machine: the
// week's analysis 27.6 times its calibration beside other tests (a load of
// 2 to 4; 63.6 s of CPU against 2.30 s) and 23.8 times alone (54.8 s
// against 2.31 s); a steady 10,000-GPU cycle, the analyzer's CPU and
// Prometheus', 12.2 to 12.7 times its own beside other tests (2.62 s
// against 214 ms) and 14.7 to 15.8 times alone (2.02 s and 2.18 s against
// 138 ms: the small pass gains more from a quiet machine). The bounds
// leave about half as much again above the highest: an analysis that read
// the week twice, or a cycle that read its window again, exceeds them.
const (
	weekEmbeddedCPU = 40
	cycle10kCPU     = 24
)

// TestBenchWeekEmbedded: a one-shot 7-day analysis of 1,000 GPUs at 30 s
// resolution from the embedded store. Targets: ≤ 60 s and ≤ 2 GiB RSS.
func TestBenchWeekEmbedded(t *testing.T) {
	n, timed := benchSize(t, 1000, 16, "GPUWATCH_BENCH_GPUS")
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 7 * 24 * time.Hour
	start := time.Now()
	dir, samples, cached := simloadtest.Compacted(t, fmt.Sprintf("bench-week-%d", n), []string{"analyzer/engine/bench_test.go"},
		func(db *embedded.DB) int { return fillWeek(t, db, n, from, span) })
	t.Logf("ingested and compacted %d samples (%d GPUs, 7 days at 30s) in %s (from the replay cache: %v)", samples, n, time.Since(start).Round(time.Second), cached)
	runtime.GC()
	debug.FreeOSMemory()
	// Reset the peak RSS so that it measures the analysis alone.
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("cannot reset peak RSS (%v): the figure includes ingestion", err)
	}
	start = time.Now()
	db, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := time.Since(start)
	e, err := New(Options{Querier: db, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	start, cpu0 := time.Now(), testtool.CPUTime()
	fs, err := e.Analyze(context.Background(), from, from.Add(span))
	if err != nil {
		t.Fatal(err)
	}
	wall, cpu := time.Since(start), testtool.CPUTime()-cpu0
	rss := testtool.PeakRSS()
	t.Logf("BENCH week-embedded: %d GPUs, 7 days: open %s, analyze %s, %d findings, peak RSS %.2f GiB",
		n, opened.Round(time.Millisecond), wall.Round(time.Millisecond), len(fs), float64(rss)/(1<<30))
	// Every GPU runs one job a day, the four kinds in turn: a quarter of
	// the week's 7n jobs never touch their GPU, a quarter run light all
	// day, a quarter hang after three hours. Each of those is a finding;
	// the floor leaves a tenth for the week's edges.
	byPattern := map[schema.Pattern]int{}
	for _, f := range fs {
		byPattern[f.Pattern]++
	}
	t.Logf("BENCH week-embedded findings: %v", byPattern)
	floor := 9 * 7 * n / 4 / 10
	for _, p := range []schema.Pattern{schema.CPUOnly, schema.LowUtilization, schema.Stuck} {
		if byPattern[p] < floor {
			t.Errorf("%d %s findings, want at least %d (a quarter of %d jobs, less a tenth)", byPattern[p], p, floor, 7*n)
		}
	}
	// The target is 60 s of wall time, printed; the bound is the
	// analysis' CPU time as a multiple of one simple pass over the same
	// week measured right after it (weekEmbeddedCPU), which a slower or
	// busier machine of the kind stretches alike.
	const target = 60 * time.Second
	t.Logf("BENCH week-embedded: %s against the %s target (%.2f×), %s of CPU", wall.Round(time.Millisecond), target,
		wall.Seconds()/target.Seconds(), cpu.Round(time.Millisecond))
	if timed {
		cal := calibrate.Measure(t, db, nil, from, from.Add(span), 3)
		calibrate.Within(t, "week analysis CPU", cpu, cal.CPU, weekEmbeddedCPU)
	}
	if timed && rss > 2<<30 {
		t.Errorf("peak RSS %.2f GiB, target 2 GiB", float64(rss)/(1<<30))
	}
	testtool.WriteBenchRow(t, "bench-week", fmt.Sprintf("| one-shot 7-day analysis of %s GPUs at 30 s from the embedded store (%s samples, the simulator's "+
		"four behaviours in turn, a job a GPU a day) | %.1f s (%.2f× the 60 s target; the test bounds its CPU time as a multiple of a simple pass over the week), %.2f GiB peak RSS (target ≤ 2 GiB), "+
		"%s findings (1-minute load %s) | `GPUWATCH_BENCH_WRITE_DOC=$PWD/docs/performance.md go test -run TestBenchWeekEmbedded ./analyzer/engine` (CI, without `-race`) |\n",
		testtool.Thousands(n), testtool.Thousands(samples), wall.Seconds(), wall.Seconds()/target.Seconds(), float64(rss)/(1<<30), testtool.Thousands(len(fs)), testtool.LoadAverage()))
}

// fleetScenario writes a scenario of nodes × 8 GPUs, two 4-GPU jobs a node
// with behaviours in turn, for the simulator.
func fleetScenario(shard, nodes int) string {
	var b strings.Builder
	b.WriteString("name: bench-fleet\ndescription: scale benchmark\nfleet:\n  - hostnames: [")
	for i := 0; i < nodes; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "s%d-n%05d", shard, i)
	}
	b.WriteString("]\n    model: H100-SXM5-80GB\n    gpus: 8\nworkloads:\n")
	behaviours := []string{"training", "cpu_only", "stuck_idle", "low_util", "hung_collective", "partial_gpus", "idle_notebook", "bursty_training"}
	for i := 0; i < nodes; i++ {
		for j := 0; j < 2; j++ {
			bh := behaviours[(2*i+j)%len(behaviours)]
			kind := ""
			if bh == "idle_notebook" {
				kind = ", kind: interactive"
			}
			fmt.Fprintf(&b, "  - {id: \"%d\", user: u%d, team: t%d, node: s%d-n%05d, gpus: [%d, %d, %d, %d], start: -3h, duration: 12h, behaviour: %s%s}\n",
				700000+2*i+j, i%50, i%7, shard, i, 4*j, 4*j+1, 4*j+2, 4*j+3, bh, kind)
		}
	}
	return b.String()
}

// cycleFleetBlocks is the fleet of TestBenchCycle10kPrometheus (nodes of
// 8 GPUs, 75 minutes at 60 s from origin) simulated into an OpenMetrics
// file and backfilled by promtool into the blocks under the folder it
// returns, through the replay cache: on two cores the simulation and the
// backfill of 10,000 GPUs are a minute before the cycles the test times,
// and they are the same blocks on every run of the same simulator,
// scenario and promtool. It reports whether the cache served them.
func cycleFleetBlocks(t *testing.T, nodes int, origin time.Time) (string, bool) {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal(err)
	}
	r := testtool.Replay{Name: fmt.Sprintf("bench-cycle-%d-nodes", nodes),
		Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"},
		Files:    []string{"analyzer/engine/bench_test.go", "analyzer/engine/prometheus_test.go", promtool},
		Extra:    fmt.Sprintf("%d nodes from %s, 75 minutes at 60 s, seeds 3 up", nodes, origin.UTC().Format(time.RFC3339))}
	cached, err := testtool.CachedReplay(t, r, data, func(data string) error {
		dir := t.TempDir()
		om := simload.NewOpenMetrics(dir)
		// The simulator caps one fleet at 4096 GPUs: simulate shards of
		// at most 500 nodes, each with its own host names, into one file.
		for shard, done := 0, 0; done < nodes; shard++ {
			k := min(500, nodes-done)
			sc, err := sim.ParseScenario("bench-fleet.yaml", []byte(fleetScenario(shard, k)))
			if err != nil {
				return err
			}
			if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: int64(3 + shard), Origin: origin,
				From: 0, To: 75 * time.Minute, Resolution: time.Minute}, om.Sink); err != nil {
				return err
			}
			done += k
		}
		path := filepath.Join(dir, "fleet.om")
		if err := om.Close(path); err != nil {
			return err
		}
		return promtoolBlocks(path, data)
	})
	if err != nil {
		t.Fatal(err)
	}
	return data, cached
}

// TestBenchCycle10kPrometheus: incremental cycles over 10,000 simulated
// GPUs against a real Prometheus. The store holds 75 minutes of the
// fleet at 60 s, long enough for the half-hour spin of its hung jobs and
// the hour-long idleness of its over-requested jobs and notebooks to be
// findings: a cycle must find them, not only read. Reports the
// queries per cycle (fixed), the findings and the wall time (target ≤ 10 s,
// the figure, which the machines running this meet with a wide
// margin: see the printed figures).
func TestBenchCycle10kPrometheus(t *testing.T) {
	needProm(t)
	nodes, timed := benchSize(t, 1250, 8, "GPUWATCH_BENCH_NODES")
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	start := time.Now()
	data, cached := cycleFleetBlocks(t, nodes, origin)
	t.Logf("simulated %d GPUs for 75 minutes at 60 s and backfilled them with promtool in %s (from the replay cache: %v)",
		nodes*8, time.Since(start).Round(time.Second), cached)
	ps := servePrometheus(t, data)
	c, err := promapi.New(ps.url, promapi.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	q := &query.Counting{Q: c}
	e, err := New(Options{Querier: q, Store: openStore(t), Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	// Per node two 4-GPU jobs, the eight behaviours in turn, all started
	// three hours before the data: by 65 minutes of data the hung
	// collectives have spun for over 30 minutes and the over-requested
	// jobs' and the idle notebooks' GPUs been idle for an hour: three jobs
	// in eight (the others need history the data does not hold, or are
	// healthy). The floor leaves a tenth.
	floor := 9 * (3 * 2 * nodes / 8) / 10
	var cal calibrate.Calibration
	if timed {
		cal = calibrate.Measure(t, c, ps.cpu, origin, origin.Add(75*time.Minute), 3)
	}
	var walls []string
	var found int
	for i, at := range []time.Duration{65 * time.Minute, 70 * time.Minute, 75 * time.Minute} {
		before := q.Count()
		start, cpu0, pcpu0 := time.Now(), testtool.CPUTime(), ps.cpu()
		res, err := e.Cycle(context.Background(), origin.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		wall, cpu := time.Since(start), testtool.CPUTime()-cpu0+ps.cpu()-pcpu0
		byPattern := map[schema.Pattern]int{}
		for _, f := range res.Findings {
			byPattern[f.Pattern]++
		}
		t.Logf("BENCH cycle-10k-prometheus: cycle %d: %d GPUs, %d allocations, %d queries, %d findings %v, %d unknown, %s wall, %s CPU",
			i+1, nodes*8, res.Allocations, q.Count()-before, len(res.Findings), byPattern, len(res.Unknown), wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
		if q.Count()-before != features.Queries {
			t.Errorf("cycle issued %d queries, want %d", q.Count()-before, features.Queries)
		}
		// The 10 s target is a steady cycle's wall time, printed; the
		// bound is its CPU time (the analyzer's and Prometheus') as a
		// multiple of one simple pass over the store (cycle10kCPU). The
		// first cycle of a fresh store also reads its two-hour warm-up (24
		// steps in one fetch) and is printed only.
		if timed && i > 0 {
			calibrate.Within(t, fmt.Sprintf("cycle %d CPU (analyzer and Prometheus)", i+1), cpu, cal.CPU, cycle10kCPU)
		}
		if res.Allocations != nodes*2 {
			t.Errorf("%d allocations, want %d", res.Allocations, nodes*2)
		}
		if len(res.Findings) < floor {
			t.Errorf("cycle %d: %d findings, want at least %d (three in eight of the %d jobs, less a tenth)", i+1, len(res.Findings), floor, 2*nodes)
		}
		walls = append(walls, fmt.Sprintf("%.2f s", wall.Seconds()))
		found = len(res.Findings)
	}
	version := "version unknown"
	if out, err := exec.Command("prometheus", "--version").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) >= 3 {
			version = f[2]
		}
	}
	testtool.WriteBenchRow(t, "bench-cycle10k", fmt.Sprintf("| incremental cycles over %s simulated GPUs (75 minutes at 60 s) against a real Prometheus %s | "+
		"%d queries (independent of fleet size; `TestQueryCountInDocs` holds the number); the first cycle, reading its warm-up, %s, "+
		"then steady cycles %s (target ≤ 10 s); %s findings open after the last (1-minute load %s) | "+
		"`GPUWATCH_BENCH_WRITE_DOC=$PWD/docs/performance.md go test -run TestBenchCycle10kPrometheus ./analyzer/engine` (CI, without `-race`) |\n",
		testtool.Thousands(nodes*8), version, features.Queries, walls[0], strings.Join(walls[1:], " and "), testtool.Thousands(found), testtool.LoadAverage()))
}
