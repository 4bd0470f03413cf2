package engine

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// windowOrigin is the demo's week start in its tests (a Monday, on the
// 5-minute grid); windowSpan the part of the demo's week replayed here:
// every pattern of the built-in scenario shows in its first 12 hours.
var windowOrigin = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)

const windowSpan = 12 * time.Hour

// demoConfig is the demo's site configuration (analyzer/demo.SiteConfig):
// the defaults plus its run-time limits.
func demoConfig() config.Config {
	c := config.Default()
	c.Patterns.Overlong.MaxRuntime[schema.KindBatch] = config.Duration(48 * time.Hour)
	c.Patterns.Overlong.MaxRuntime[schema.KindInteractive] = config.Duration(24 * time.Hour)
	return c
}

// demoDB replays the demo's scenario (sim.DefaultScenario) as `gpuwatch
// demo` stores it: 30 s collections in (origin, origin+span].
func demoDB(t *testing.T) (*embedded.DB, int) {
	t.Helper()
	sc := sim.DefaultScenario()
	db, _ := simloadtest.Store(t, sc, simload.Options{Seed: 1, Origin: windowOrigin, From: 30 * time.Second, To: windowSpan, Resolution: 30 * time.Second}, embedded.Options{})
	gpus := 0
	for _, n := range sc.Nodes {
		gpus += n.GPUs
	}
	return db, gpus
}

// skipWindowUnderRace skips the window tests under the race detector.
// They are arithmetic over the demo's 12 hours (a cycle per step, ten
// windows): 25 s and 17 s under -race on two cores (9 s without), while
// the engine's concurrent paths (AnalyzeWindow's and Cycle's queries in
// flight) stay race-checked by the other tests of this package that
// analyze windows and run cycles. scripts/test.sh runs them without -race
// beside the corpus week.
func skipWindowUnderRace(t *testing.T) {
	t.Helper()
	if testtool.Race {
		t.Skip("window arithmetic over the demo's 12 hours runs without -race: scripts/test.sh runs it beside the corpus week")
	}
}

// jobPatterns lists the findings as job|pattern, sorted.
func jobPatterns(fs []finding.Finding) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.Job+"|"+string(f.Pattern))
	}
	sort.Strings(out)
	return out
}

// TestWindowAlignmentHoldsTheAnswer moves `analyze`'s --from across two
// steps of the demo's data, at offsets on and off the step grid. Job 1013
// starts with the data and waits 40 minutes for its GPUs: a window off the
// grid once cut its first step short, which made its start unknown and
// lost its startup_overhead finding (34 findings became 33 on the demo's
// week), and allocated GPU-hours rose as --from moved later. Now every
// offset finds the same jobs and patterns; offsets within one step give
// the same answer to the digit; allocated GPU-hours never rise as --from
// moves later and fall by at most the fleet's GPUs times the steps the
// window lost; and no finding counts hours outside the window (the warm-up
// before --from only informs the detectors' state).
func TestWindowAlignmentHoldsTheAnswer(t *testing.T) {
	skipWindowUnderRace(t)
	t.Parallel()
	db, gpus := demoDB(t)
	e, err := New(Options{Querier: db, Config: demoConfig()})
	if err != nil {
		t.Fatal(err)
	}
	step := e.Step()
	ctx := context.Background()
	to := windowOrigin.Add(windowSpan)
	offsets := []time.Duration{0, 30 * time.Second, 100 * time.Second, 150 * time.Second, 290 * time.Second,
		step, step + 30*time.Second, step + 100*time.Second, 2*step - time.Second, 2 * step}
	var want []string
	var prev Analysis
	for i, off := range offsets {
		from := windowOrigin.Add(off)
		a, err := e.AnalyzeWindow(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		got := jobPatterns(a.Findings)
		if i == 0 {
			want = got
			if !strings.Contains(strings.Join(got, " "), "1013|"+string(schema.StartupOverhead)) {
				t.Fatalf("the demo's data lacks 1013's startup overhead at --from on the grid: %v", got)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("--from +%s finds %v, --from +0s %v", off, got, want)
		}
		start, _ := accounting.OnGrid(from, to, step)
		if !a.Coverage.From.Equal(start) || start.Sub(from) < 0 || start.Sub(from) >= step {
			t.Errorf("--from +%s: window starts at %s, want the first step at or after --from (%s)", off, a.Coverage.From, start)
		}
		checkInWindow(t, off, a)
		if i > 0 {
			checkMove(t, offsets[i-1], off, prev, a, gpus)
		}
		prev = a
		t.Logf("--from +%-6s window %s: %d findings, %.3f allocated, %.3f wasted GPU-hours", off, a.Coverage.From.Format("15:04"),
			len(a.Findings), a.Book.Allocated, a.Book.Wasted)
	}
}

// checkInWindow fails when a finding counts more GPU-hours than its GPUs
// held within the analysed window.
func checkInWindow(t *testing.T, off time.Duration, a Analysis) {
	t.Helper()
	for _, en := range a.Book.Entries {
		f := en.Finding
		in := accounting.Overlap(f.Start, f.End, a.Coverage.From, a.Coverage.To).Hours() * float64(len(f.GPUs))
		// Findings carry their GPU-hours to three decimals.
		if en.Wasted+en.Orphan > in+0.0005 {
			t.Errorf("--from +%s: %s (%s to %s) counts %.6f GPU-hours, its %d GPUs held %.6f in the window %s to %s", off, f.Key(), f.Start.Format(time.RFC3339), f.End.Format(time.RFC3339),
				en.Wasted+en.Orphan, len(f.GPUs), in, a.Coverage.From.Format(time.RFC3339), a.Coverage.To.Format(time.RFC3339))
		}
	}
}

// checkMove compares the analyses at two --from offsets, b later than a.
func checkMove(t *testing.T, offA, offB time.Duration, a, b Analysis, gpus int) {
	t.Helper()
	lost := b.Coverage.From.Sub(a.Coverage.From)
	if lost == 0 {
		// The same steps: the same answer, finding by finding.
		if a.Book.Totals != b.Book.Totals {
			t.Errorf("--from +%s and +%s start at the same step but account %+v and %+v", offA, offB, a.Book.Totals, b.Book.Totals)
		}
		for i := range a.Findings {
			x, y := a.Findings[i], b.Findings[i]
			if x.Key() != y.Key() || x.WastedGPUHours != y.WastedGPUHours || !x.Start.Equal(y.Start) || !x.End.Equal(y.End) {
				t.Errorf("--from +%s and +%s start at the same step but differ on %s: %.3f GPU-h %s-%s, %.3f GPU-h %s-%s", offA, offB,
					x.Key(), x.WastedGPUHours, x.Start, x.End, y.WastedGPUHours, y.Start, y.End)
			}
		}
		return
	}
	drop := a.Book.Allocated - b.Book.Allocated
	if drop < -1e-9 {
		t.Errorf("--from +%s: %.3f allocated GPU-hours, more than at +%s (%.3f)", offB, b.Book.Allocated, offA, a.Book.Allocated)
	}
	if most := float64(gpus) * lost.Hours(); drop > most+1e-9 {
		t.Errorf("--from +%s -> +%s: allocated fell by %.3f GPU-hours, more than %d GPUs over the %s the window lost (%.3f)",
			offA, offB, drop, gpus, lost, most)
	}
}

// TestAnalyzeMatchesDaemonOnAWindow runs the daemon's cycles over the
// demo's data, one per step as the daemon and the demo do, and reads a
// window off the grid from what they stored, as the reports and the
// planner do (accounting.Books), and builds the report of the whole span
// (report.Builder); `analyze` over the same window shows the same findings
// and the same GPU-hours. The reports once read the findings of the cycles
// in [from, to), one cycle early: the one at from judged the step before
// the window and the one at to, which judged its last step, was left out.
func TestAnalyzeMatchesDaemonOnAWindow(t *testing.T) {
	skipWindowUnderRace(t)
	t.Parallel()
	db, _ := demoDB(t)
	st := openStore(t)
	ctx := context.Background()
	e, err := New(Options{Querier: db, Store: st, Config: demoConfig()})
	if err != nil {
		t.Fatal(err)
	}
	step := e.Step()
	for now := windowOrigin.Add(step); !now.After(windowOrigin.Add(windowSpan)); now = now.Add(step) {
		if _, err := e.Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ from, to time.Duration }{
		{100 * time.Second, 11*time.Hour + 100*time.Second},
		{step + 30*time.Second, 6*time.Hour + 4*time.Minute},
		{0, windowSpan},
	} {
		from, to := windowOrigin.Add(w.from), windowOrigin.Add(w.to)
		a, err := e.AnalyzeWindow(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		book, err := accounting.Books{Records: st, Step: step}.Book(ctx, from, to)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("[+%s, +%s)", w.from, w.to)
		if !book.From.Equal(a.Coverage.From) || !book.To.Equal(a.Coverage.To) {
			t.Errorf("%s: analyze judges %s to %s, the stored records %s to %s", name, a.Coverage.From, a.Coverage.To, book.From, book.To)
		}
		stored, err := accounting.Findings(ctx, st, book.From, book.To)
		if err != nil {
			t.Fatal(err)
		}
		var inWindow []finding.Finding
		for _, f := range stored {
			if !f.End.Before(book.From) {
				inWindow = append(inWindow, f)
			}
		}
		if g, d := strings.Join(jobPatterns(a.Findings), " "), strings.Join(jobPatterns(inWindow), " "); g != d {
			t.Errorf("%s: analyze finds\n  %s\nthe daemon stored\n  %s", name, g, d)
		}
		x, y := a.Book.Totals, book.Totals
		for i, m := range []string{"allocated", "used", "wasted", "over the limit", "degraded", "orphaned"} {
			av := []float64{x.Allocated, x.Used, x.Wasted, x.OverLimit, x.Degraded, x.Orphan}[i]
			dv := []float64{y.Allocated, y.Used, y.Wasted, y.OverLimit, y.Degraded, y.Orphan}[i]
			// A finding's GPU-hours are kept to the thousandth: analyze
			// clips each finding to the window before rounding, the
			// daemon's records clip the rounded whole episode, so they
			// agree to a thousandth per finding.
			if math.Abs(av-dv) > 1e-3*float64(len(a.Findings)) {
				t.Errorf("%s: analyze accounts %.4f GPU-hours %s, the daemon's records %.4f", name, av, m, dv)
			}
		}
		if x.Allocated <= 0 || x.Wasted <= 0 {
			t.Errorf("%s: nothing accounted: %+v", name, x)
		}
		t.Logf("%s: %d findings, %s", name, len(a.Findings), x.Line())
	}
	checkReport(t, e, st)
}

// checkReport builds the fleet report of the replayed span from what the
// daemon stored, as the report command does, and compares its totals with
// `analyze` over the same span: the report counts the findings its last
// cycle recorded (the one at the span's end), as analyze sees them.
func checkReport(t *testing.T, e *Engine, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	cfg := &report.Config{}
	cfg.Defaults()
	p := report.Period{Kind: report.Day, Label: "replayed", Start: windowOrigin, End: windowOrigin.Add(windowSpan)}
	r, err := (&report.Builder{Data: st, Config: cfg}).Build(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(ctx, p.Start, p.End)
	if err != nil {
		t.Fatal(err)
	}
	x, y := a.Book.Totals, r.Totals
	for i, m := range []string{"allocated", "used", "wasted", "over the limit", "degraded", "orphaned"} {
		av := []float64{x.Allocated, x.Used, x.Wasted, x.OverLimit, x.Degraded, x.Orphan}[i]
		rv := []float64{y.AllocatedGPUHours, y.ActiveGPUHours, y.WastedGPUHours, y.OverLimitGPUHours, y.DegradedGPUHours, y.OrphanGPUHours}[i]
		if math.Abs(av-rv) > 1e-6 {
			t.Errorf("the report of %s to %s shows %.4f GPU-hours %s, analyze %.4f", p.Start, p.End, rv, m, av)
		}
	}
}
