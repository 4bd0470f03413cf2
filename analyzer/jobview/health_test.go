package jobview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// healthFleet: a 4-GPU job whose GPU 1 raises XID 79 ("GPU has fallen off
// the bus", hardware in NVIDIA's XID catalogue) and drops off two minutes
// before the job ends, and a 4-GPU job with one thermally throttled GPU.
const healthFleet = `
name: health-view
fleet:
  - {hostname: xf-01, model: H100-SXM5-80GB, gpus: 4}
  - {hostname: th-01, model: A100-SXM4-80GB, gpus: 4}
workloads:
  - {id: "3003", user: cat, team: llm, job_name: lost, node: xf-01, gpus: [0, 1, 2, 3], start: 0s, duration: 90m, behaviour: training}
  - {id: "3002", user: ben, team: llm, job_name: ddp, node: th-01, gpus: [0, 1, 2, 3], start: 0s, duration: 2h, behaviour: training}
faults:
  - {kind: xid, node: xf-01, gpus: [1], at: 88m, xid: 79}
  - {kind: gpu_lost, node: xf-01, gpus: [1], at: 88m30s}
  - {kind: thermal_throttle, node: th-01, gpus: [2], at: 0s}
`

func healthStore(t *testing.T, f simload.Format) (*embedded.DB, string) {
	t.Helper()
	sc, err := sim.ParseScenario("health-view", []byte(healthFleet))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	app, om := db.Appender(), simload.NewOpenMetrics(dir)
	toDB := f.Sink(func(ts time.Time, fams []*dto.MetricFamily) error {
		return app.AppendFamilies(context.Background(), ts, fams)
	})
	toOM := f.Sink(om.Sink)
	if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: 3, Origin: origin, To: 2*time.Hour + 10*time.Minute, Resolution: 30 * time.Second},
		func(ts time.Time, fams []*dto.MetricFamily) error {
			if err := toDB(ts, fams); err != nil {
				return err
			}
			return toOM(ts, fams)
		}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "health.om")
	if err := om.Close(file); err != nil {
		t.Fatal(err)
	}
	return db, file
}

func healthView(t *testing.T, q query.Querier, job string) *jobview.Report {
	t.Helper()
	ref, err := jobview.ParseRef(job)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobview.Build(context.Background(), jobview.Options{Querier: q, Config: config.Default(), Now: origin.Add(2*time.Hour + 10*time.Minute), Lookback: 4 * time.Hour}, ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkHealthViews: the XID 79 job is shown as ended by a GPU fault, naming
// the GPU, in the view, its JSON, its text and its AdminComment summary;
// the straggler's degraded GPU-hours are their own total, never waste.
func checkHealthViews(t *testing.T, q query.Querier) {
	t.Helper()
	r := healthView(t, q, "3003")
	if r.Health == nil || !strings.Contains(r.Health.EndedByFault, "resubmit") || !strings.Contains(r.Health.EndedByFault, "XID 79") {
		t.Fatalf("XID 79 job: health %+v, want it ended by the GPU fault", r.Health)
	}
	var fault *jobview.Finding
	for i := range r.Findings {
		if r.Findings[i].Pattern == schema.GPUFault {
			fault = &r.Findings[i]
		}
	}
	if fault == nil || fault.GPU == "" || !strings.Contains(r.Health.EndedByFault, fault.GPU) || fault.WastedGPUHours != 0 {
		t.Fatalf("XID 79 job: gpu_fault %+v", fault)
	}
	var js bytes.Buffer
	if err := jobview.JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if h, _ := back["health"].(map[string]any); h == nil || h["ended_by_fault"] != r.Health.EndedByFault {
		t.Errorf("JSON health: %v", back["health"])
	}
	var txt bytes.Buffer
	if err := jobview.Text(&txt, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "ENDED BY A GPU FAULT: "+r.Health.EndedByFault) {
		t.Errorf("text lacks the fault:\n%s", txt.String())
	}
	s, err := jobview.EncodeSummary(r, "", 4000)
	if err != nil {
		t.Fatal(err)
	}
	d, err := jobview.DecodeSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	if d.Health == nil || d.Health.EndedByFault != r.Health.EndedByFault {
		t.Errorf("summary: ended by %+v, view %q", d.Health, r.Health.EndedByFault)
	}

	st := healthView(t, q, "3002")
	var strag *jobview.Finding
	for i := range st.Findings {
		if st.Findings[i].Pattern == schema.Straggler {
			strag = &st.Findings[i]
		}
	}
	if strag == nil || strag.GPU == "" {
		t.Fatalf("straggler job: findings %+v", st.Findings)
	}
	if st.Totals.DegradedGPUHours <= 0 || st.Totals.DegradedGPUHours != strag.Evidence[schema.EvidenceDegraded] || st.Totals.WastedGPUHours != 0 {
		t.Errorf("straggler job: totals %+v, finding evidence %v", st.Totals, strag.Evidence)
	}
	s, err = jobview.EncodeSummary(st, "", 4000)
	if err != nil {
		t.Fatal(err)
	}
	if d, err = jobview.DecodeSummary(s); err != nil || d.Totals.DegradedGPUHours != st.Totals.DegradedGPUHours {
		t.Errorf("summary degraded %+v (%v), view %.3f", d.Totals, err, st.Totals.DegradedGPUHours)
	}
}

func TestJobViewHealthEmbedded(t *testing.T) {
	t.Parallel()
	db, _ := healthStore(t, simload.Format{})
	checkHealthViews(t, db)
	r := healthView(t, db, "3002")
	if len(r.Health.Missing) != 0 {
		t.Errorf("gpuwatch's own series: missing %+v", r.Health.Missing)
	}
}

// TestJobViewHealthPrometheus: the same views on a real Prometheus.
func TestJobViewHealthPrometheus(t *testing.T) {
	t.Parallel()
	_, file := healthStore(t, simload.Format{})
	c, err := promapi.New(promFrom(t, file), promapi.Options{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	checkHealthViews(t, c)
}

// TestJobViewHealthSignalsMissing: on dcgm-exporter's default counters the
// view names the signals it lacks.
func TestJobViewHealthSignalsMissing(t *testing.T) {
	t.Parallel()
	db, _ := healthStore(t, simload.Format{Stock: true, Counters: simload.DCGMDefault, Host: schema.LabelHostname})
	r := healthView(t, db, "3002")
	missing := map[string]bool{}
	for _, s := range r.Health.Missing {
		missing[s.Name] = true
	}
	if !missing["throttle_reasons"] || missing["sm_clock"] || missing["xid"] {
		t.Errorf("dcgm-exporter defaults: missing %+v, present %v", r.Health.Missing, r.Health.Present)
	}
	var txt bytes.Buffer
	if err := jobview.Text(&txt, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(txt.String(), "Health signal missing: throttle_reasons") {
		t.Errorf("text does not say which signal is missing:\n%s", txt.String())
	}
}
