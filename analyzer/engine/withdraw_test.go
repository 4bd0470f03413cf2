package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestWithdrawnVerdictLeavesTheStore: a daily inference service looks
// lightly used while its history is a quiet night; once the morning's
// traffic is in its history, the cumulative low_utilization verdict no
// longer holds. The cycle that sees it withdraws it, and the store (what
// reports and the web page read) and the published accounting forget it,
// as a one-shot analysis of the same window never reports it.
func TestWithdrawnVerdictLeavesTheStore(t *testing.T) {
	origin := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	sc, err := sim.ParseScenario("serve.yaml", []byte(`
name: serve
fleet:
  - hostname: h100-01
    model: H100-SXM5-80GB
    gpus: 2
workloads:
  - {id: llm-serve-0, scheduler: kubernetes, namespace: serving, container: vllm, user: svc, team: llm, job_name: llm-serve,
     node: h100-01, gpus: [0, 1], start: -12h, duration: 72h, behaviour: inference_daily, params: {min_util: 5}}
`))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	app := db.Appender()
	const span = 12 * time.Hour
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 1, Origin: origin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second},
		func(ts time.Time, f []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, f) }); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	e, err := New(Options{Querier: db, Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	const key = "h100-01|serving/llm-serve-0|" + string(schema.LowUtilization)
	var seen, withdrawn bool
	for at := origin.Add(5 * time.Minute); !at.After(origin.Add(span)); at = at.Add(5 * time.Minute) {
		res, err := e.Cycle(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		m.Observe(res)
		for _, f := range res.Findings {
			seen = seen || f.Key() == key
		}
		for _, k := range res.Withdrawn {
			withdrawn = withdrawn || (k == key && seen)
		}
	}
	if !seen || !withdrawn {
		t.Fatalf("low_utilization on the service: reported %v, withdrawn %v; the scenario no longer shows a verdict that history withdraws", seen, withdrawn)
	}
	fs, err := st.FindingsBetween(ctx, origin, origin.Add(span+time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Key() == key {
			t.Errorf("the store still holds the withdrawn verdict: %+v", f)
		}
	}
	if w := m.Accounting().Wasted; w != 0 {
		t.Errorf("published accounting keeps %.2f wasted GPU-hours of a withdrawn verdict", w)
	}
	oneShot, err := e.Analyze(ctx, origin, origin.Add(span))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range oneShot {
		if f.Key() == key {
			t.Errorf("the one-shot analysis reports %s", key)
		}
	}
}
