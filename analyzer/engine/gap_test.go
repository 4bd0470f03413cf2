package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/schema"
)

// gapScenario holds a GPU for 24 h without using it, next to a training
// job, on one node whose exporter is down for 10 minutes at 12 h.
const gapScenario = `
name: gap
origin: 2026-03-02T00:00:00Z
fleet:
  - hostname: node-a
    model: A100-SXM4-80GB
    gpus: 2
workloads:
  - {id: "9001", user: bob, account: dev-vision, node: node-a, gpus: [0], start: 30m, duration: 24h, behaviour: cpu_only}
  - {id: "9002", user: alice, account: dev-vision, node: node-a, gpus: [1], start: 30m, duration: 24h, behaviour: training}
`

var gapOrigin = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

const (
	gapFrom = 12 * time.Hour
	gapLen  = 10 * time.Minute
	gapSpan = 26 * time.Hour
)

// gapOutage is the exporter restart of gapScenario: no scrape in
// [gapFrom, gapFrom+gapLen).
var gapOutage = simload.Window{From: gapOrigin.Add(gapFrom), To: gapOrigin.Add(gapFrom + gapLen)}

// gapDB replays gapScenario's simulator output into an embedded TSDB at
// 30 s scrapes, leaving out gapOutage as an exporter restart would.
func gapDB(t *testing.T) *embedded.DB {
	t.Helper()
	down := simload.Format{Outages: []simload.Window{gapOutage}}
	return simloadtest.Formatted(t, simloadtest.Parse(t, "gap.yaml", gapScenario),
		simload.Options{Seed: 7, Origin: gapOrigin, From: 30 * time.Second, To: gapSpan, Resolution: 30 * time.Second}, down.Sink)
}

// cpuOnlyOf returns job 9001's one cpu_only finding.
func cpuOnlyOf(t *testing.T, fs []finding.Finding) finding.Finding {
	t.Helper()
	var got []finding.Finding
	for _, f := range fs {
		if f.Job == "9001" && f.Pattern == schema.CPUOnly {
			got = append(got, f)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d cpu_only findings on job 9001, want 1: %v", len(got), jobPatterns(fs))
	}
	return got[0]
}

// A 10-minute exporter outage in the middle of a CPU-only job's 24 hours
// once reset "idle since it started": the job was credited half its held
// time. The gap now pauses the clock: one finding, over the whole held
// time less the gap, which is what the accounting says it held. A window
// that starts mid-job counts only its hours inside, from its start.
func TestGapPausesCPUOnly(t *testing.T) {
	t.Parallel()
	db := gapDB(t)
	e, err := New(Options{Querier: db, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := e.AnalyzeWindow(ctx, gapOrigin, gapOrigin.Add(gapSpan))
	if err != nil {
		t.Fatal(err)
	}
	checkGapPaused(t, a)

	from := gapOrigin.Add(18 * time.Hour)
	w, err := e.AnalyzeWindow(ctx, from, gapOrigin.Add(gapSpan))
	if err != nil {
		t.Fatal(err)
	}
	checkGapClipped(t, w, from)
}

// checkGapPaused holds an analysis of gapScenario's whole span to one
// cpu_only finding on job 9001 over its held time less the outage.
func checkGapPaused(t *testing.T, a Analysis) {
	t.Helper()
	f := cpuOnlyOf(t, a.Findings)
	if f.Evidence["episodes"] != 1 {
		t.Errorf("%v episodes, want 1: the gap ended none", f.Evidence["episodes"])
	}
	held := a.Book.Allocations[accounting.Key(f.Hostname, f.Job)].Allocated
	want := (24*time.Hour - gapLen).Hours()
	// The start is known to within a step of scrapes.
	if math.Abs(f.WastedGPUHours-want) > 0.1 || math.Abs(f.WastedGPUHours-held) > 0.1 {
		t.Errorf("wasted %.3f GPU-hours, want %.3f (24 h less the gap; held %.3f)", f.WastedGPUHours, want, held)
	}
}

// checkGapClipped holds an analysis of gapScenario from --from (18h in)
// to job 9001's cpu_only clipped to the window, its warm-up informing
// the state only.
func checkGapClipped(t *testing.T, w Analysis, from time.Time) {
	t.Helper()
	f := cpuOnlyOf(t, w.Findings)
	if !f.Start.Equal(from) {
		t.Errorf("window from 18h: finding starts %s, want %s", f.Start, from)
	}
	// The job runs to 24h30m: 6.5 h of it in the window.
	if want := 6.5; math.Abs(f.WastedGPUHours-want) > 0.1 {
		t.Errorf("window from 18h: wasted %.3f GPU-hours, want %.3f (the warm-up's hours left out)", f.WastedGPUHours, want)
	}
	// The warm-up (2h less a step before --from) still counts toward
	// how long the job has been idle.
	if want := 6.5*60 + 115; f.Evidence["idle_minutes"] != want {
		t.Errorf("window from 18h: idle %v minutes, want %v: the warm-up informs the state", f.Evidence["idle_minutes"], want)
	}
}
