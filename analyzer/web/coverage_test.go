package web

import (
	"context"
	"html"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestCoverageSaysWhy: when a daemon's cycle finds nothing, the web page
// and /metrics say what it saw and why, as `gpuwatch analyze` does over the
// same window: no data, a window shorter than the thresholds, and series
// with no label the analyzer knows as an allocation. The telemetry is 3
// hours of one idle GPU on a node labelled the dcgm-exporter 3.x way
// (Hostname), allocated to a Slurm job from minute 10.
func TestCoverageSaysWhy(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ss []embedded.Sample
	for off := time.Duration(0); off < 3*time.Hour; off += 30 * time.Second {
		for _, m := range []struct {
			metric *schema.Metric
			v      float64
		}{{schema.GPUUtil, 0}, {schema.FBUsed, 0}, {schema.FBFree, 81000}} {
			l := map[string]string{"__name__": m.metric.Name, schema.LabelUUID: "GPU-1", schema.LabelGPU: "0",
				schema.LabelOldHost: "node-7", schema.LabelModelName: "A100"}
			if off >= 10*time.Minute {
				l[schema.LabelHPCJob] = "4242"
			}
			ss = append(ss, embedded.Sample{Labels: l, T: from.Add(off), V: m.v})
		}
	}
	ctx := context.Background()
	if err := db.Appender().AppendSamples(ctx, ss); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		from, to      time.Time
		gpus, allocs  float64
		reason, ratio string
	}{
		{"no data", from.Add(-48 * time.Hour), from.Add(-24 * time.Hour), 0, 0, "no data: no GPU series", "0"},
		{"short window", from.Add(10 * time.Minute), from.Add(35 * time.Minute), 1, 1, "window too short: 25m0s of data", "1"},
		{"unknown label convention", from.Add(-time.Hour), from.Add(5 * time.Minute), 1, 0, "no allocation on 1 GPUs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := store.Open(":memory:")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// A fresh daemon's first cycle reads its warm-up: the window.
			e, err := engine.New(engine.Options{Querier: db, Store: st, WarmUp: tc.to.Sub(tc.from)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Cycle(ctx, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			a, err := e.AnalyzeWindow(ctx, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			line := present.CoverageLine(a.Coverage)
			if !strings.Contains(line, tc.reason) || present.CoverageLine(res.Coverage) != line {
				t.Fatalf("analyze says %q, the cycle %q; want %q in both", line, present.CoverageLine(res.Coverage), tc.reason)
			}
			m := engine.NewMetrics()
			m.Observe(res)
			h := Handler(Options{Findings: StoreFindings{Store: st, Now: func() time.Time { return tc.to }}, Coverage: m,
				Now: func() time.Time { return tc.to }})
			_, _, body := get(t, h, "/")
			if !strings.Contains(body, `<p class="muted" id="coverage">Last analyzer cycle, `) || !strings.Contains(body, html.EscapeString(line)+`</p>`) {
				t.Errorf("web page lacks %q:\n%s", line, body)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(m)
			for name, want := range map[string]float64{schema.AnalyzerGPUsSeen.Name: tc.gpus, schema.AnalyzerAllocationsSeen.Name: tc.allocs,
				schema.AnalyzerCoverage.Name: a.Coverage.Ratio} {
				got, err := testutil.GatherAndCount(reg, name)
				if err != nil || got != 1 {
					t.Fatalf("/metrics has %d %s series (%v)", got, name, err)
				}
				fams, _ := reg.Gather()
				for _, f := range fams {
					if f.GetName() == name {
						if v := f.Metric[0].GetGauge().GetValue(); v != want {
							t.Errorf("/metrics %s = %v, want %v (what analyze saw)", name, v, want)
						}
					}
				}
			}
			switch tc.ratio {
			case "0":
				if a.Coverage.Ratio != 0 {
					t.Errorf("coverage %v with no data", a.Coverage.Ratio)
				}
			case "1":
				if a.Coverage.Ratio < 0.9 {
					t.Errorf("coverage %v over a window full of data", a.Coverage.Ratio)
				}
			}
		})
	}
}

type lastCoverage engine.Coverage

func (c lastCoverage) LastCoverage() (engine.Coverage, bool) { return engine.Coverage(c), true }

// A cycle that judged nothing new (its interval was short) above findings
// from earlier cycles: the line says it is about the last cycle, names its
// window, and does not say "No findings" above a table of them; the cards
// say which span of time their figures cover.
func TestHeadlineAgreesWithTable(t *testing.T) {
	to := fixtureNow
	cov := lastCoverage{From: to.Add(-25 * time.Minute), To: to, GPUs: 4, Allocations: 2, Ratio: 1, Reason: "window too short: 25m0s of data"}
	fs := fixtureFindings()
	h := Handler(Options{Findings: fakeFindings{fs: fs}, Coverage: cov, Now: func() time.Time { return to }})
	_, _, body := get(t, h, "/")
	if strings.Contains(body, "No findings:") {
		t.Errorf("the page says No findings above %d findings:\n%s", len(fs), body)
	}
	for _, want := range []string{
		"Last analyzer cycle, " + cov.From.UTC().Format("2006-01-02 15:04") + " to " + to.UTC().Format("2006-01-02 15:04") + " UTC",
		"It found nothing new (window too short: 25m0s of data); the findings below come from earlier cycles.",
	} {
		if !strings.Contains(body, html.EscapeString(want)) {
			t.Errorf("page lacks %q", want)
		}
	}
	from, end := fs[0].Start, fs[0].End
	for _, f := range fs {
		if f.Start.Before(from) {
			from = f.Start
		}
		if f.End.After(end) {
			end = f.End
		}
	}
	span := `<span id="span">` + from.UTC().Format("2006-01-02 15:04") + " to " + end.UTC().Format("2006-01-02 15:04") + " UTC</span>"
	if !strings.Contains(body, span) {
		t.Errorf("the wasted card does not name its span %s", span)
	}
	// With no findings at all, the cycle's reason is the headline.
	h = Handler(Options{Findings: fakeFindings{}, Coverage: cov, Now: func() time.Time { return to }})
	if _, _, body := get(t, h, "/"); !strings.Contains(body, "No findings: window too short") {
		t.Errorf("an empty page does not say why it is empty")
	}
}
