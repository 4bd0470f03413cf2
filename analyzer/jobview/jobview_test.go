package jobview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

var origin = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// fleet is a simulated node whose jobs show one waste pattern each, and
// a job whose GPU falls off the bus for half its life.
const fleet = `
name: jobview
fleet: [{hostname: node-a, model: H100-SXM5-80GB, gpus: 8}, {hostname: node-b, model: H100-SXM5-80GB, gpus: 8}]
workloads:
  - {id: "501", user: alice, team: vision, job_name: ddp, node: node-a, gpus: [0, 1, 2, 3], start: 30m, duration: 9h, behaviour: partial_gpus, params: {idle_gpus: 2}}
  - {id: "502", user: bob, team: nlp, node: node-a, gpus: [4], start: 0s, duration: 10h, behaviour: cpu_only}
  - {id: "503", user: carol, team: nlp, node: node-a, gpus: [5], start: 0s, duration: 10h, behaviour: low_util, params: {util: 12, memory_gib: 4}}
  - {id: "504", user: dave, team: nlp, node: node-a, gpus: [6], start: 1h, duration: 8h, behaviour: training}
  - {id: nb-erin, scheduler: kubernetes, namespace: ml, user: erin, team: ml, node: node-a, gpus: [7], start: 0s, duration: 10h, behaviour: idle_notebook}
  - {id: ddp-pod, scheduler: kubernetes, namespace: ml, user: erin, team: ml, node: node-b, gpus: [0, 1, 2, 3], start: 30m, duration: 9h, behaviour: partial_gpus, params: {idle_gpus: 2}}
  - {id: cpu-pod, scheduler: kubernetes, namespace: ml, user: erin, team: ml, node: node-b, gpus: [4], start: 0s, duration: 10h, behaviour: cpu_only}
  - {id: light-pod, scheduler: kubernetes, namespace: ml, user: erin, team: ml, node: node-b, gpus: [5], start: 0s, duration: 10h, behaviour: low_util, params: {util: 12, memory_gib: 4}}
faults:
  - {kind: gpu_lost, node: node-a, gpus: [6], at: 3h, duration: 5h}
`

var (
	storeOnce sync.Once
	store     *embedded.DB
	storeErr  error
)

// simStore replays the fleet's ten hours into an embedded store, as the
// agent keeps it.
func simStore(t *testing.T) *embedded.DB {
	t.Helper()
	storeOnce.Do(func() {
		sc, err := sim.ParseScenario("jobview", []byte(fleet))
		if err != nil {
			storeErr = err
			return
		}
		dir, err := mkdirTemp()
		if err != nil {
			storeErr = err
			return
		}
		store, storeErr = embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
		if storeErr != nil {
			return
		}
		app := store.Appender()
		_, storeErr = simload.Replay(context.Background(), sc, simload.Options{Seed: 3, Origin: origin, To: 10 * time.Hour, Resolution: 30 * time.Second},
			func(ts time.Time, f []*dto.MetricFamily) error {
				return app.AppendFamilies(context.Background(), ts, f)
			})
	})
	if storeErr != nil {
		t.Fatal(storeErr)
	}
	return store
}

func build(t *testing.T, job string) *jobview.Report {
	t.Helper()
	ref, err := jobview.ParseRef(job)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobview.Build(context.Background(), jobview.Options{Querier: simStore(t), Now: origin.Add(12 * time.Hour), Lookback: 24 * time.Hour}, ref)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The job view's findings are the engine's findings on the whole fleet for
// that job: narrowing the queries to the job's GPUs changes nothing.
func TestFindingsAreTheFleetAnalysis(t *testing.T) {
	t.Parallel()
	e, err := engine.New(engine.Options{Querier: simStore(t), Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	all, err := e.Analyze(context.Background(), origin.Add(-5*time.Minute), origin.Add(11*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		job     string
		pattern schema.Pattern
		advice  string
	}{
		{"501", schema.OverRequested, "--gres=gpu:2"},
		{"502", schema.CPUOnly, "CPU partition without --gres=gpu"},
		{"503", schema.LowUtilization, "MIG 1g.10gb slice (10 GiB, 1/7 of the GPU) would fit it and free the rest for others: request --gres=gpu:1g.10gb:1"},
		// A pod's owner gets the same advice in resource requests.
		{"ml/ddp-pod", schema.OverRequested, "request nvidia.com/gpu: 2 in the pod's resources.limits"},
		{"ml/cpu-pod", schema.CPUOnly, "drop nvidia.com/gpu from the pod's resources.limits"},
		{"ml/light-pod", schema.LowUtilization, "request nvidia.com/mig-1g.10gb: 1 in the pod's resources.limits"},
		{"ml/nb-erin", schema.IdleSession, "idle"},
	} {
		r := build(t, tc.job)
		var want []finding.Finding
		for _, f := range all {
			if f.Job == tc.job {
				want = append(want, f)
			}
		}
		if len(r.Findings) != len(want) || len(want) == 0 {
			t.Fatalf("job %s: %d findings, fleet analysis %d", tc.job, len(r.Findings), len(want))
		}
		for i, f := range r.Findings {
			w := want[i]
			if f.Pattern != w.Pattern || f.WastedGPUHours != w.WastedGPUHours || !f.Start.Equal(w.Start) || !f.End.Equal(w.End) || f.Detail != w.Advice {
				t.Errorf("job %s: finding %s %.3f GPUh %s..%s, fleet %s %.3f GPUh %s..%s", tc.job, f.Pattern, f.WastedGPUHours, f.Start, f.End,
					w.Pattern, w.WastedGPUHours, w.Start, w.End)
			}
		}
		if r.Findings[0].Pattern != tc.pattern || !strings.Contains(r.Findings[0].Advice, tc.advice) {
			t.Errorf("job %s: %s advice %q, want %s with %q", tc.job, r.Findings[0].Pattern, r.Findings[0].Advice, tc.pattern, tc.advice)
		}
		if r.Scheduler == "kubernetes" && strings.Contains(r.Findings[0].Advice, "--gres") {
			t.Errorf("pod %s gets Slurm advice: %q", tc.job, r.Findings[0].Advice)
		}
		if r.NotEnoughData != "" || r.Coverage < 0.9 {
			t.Errorf("job %s: coverage %.2f, %s", tc.job, r.Coverage, r.NotEnoughData)
		}
	}
	if r := build(t, "ml/nb-erin"); r.Scheduler != "kubernetes" || r.User != "erin" || r.Team != "ml" || r.Kind != "interactive" || len(r.GPUs) != 1 {
		t.Errorf("pod ml/nb-erin: %s %s %s %s, %d GPUs", r.Scheduler, r.User, r.Team, r.Kind, len(r.GPUs))
	}
	r := build(t, "501")
	// Rows in GPU number order, as people count them (not by UUID).
	var order []string
	for _, g := range r.GPUs {
		order = append(order, g.Index)
	}
	if got := strings.Join(order, ","); got != "0,1,2,3" {
		t.Errorf("job 501's GPUs in the order %s, want 0,1,2,3", got)
	}
	if r.User != "alice" || r.Team != "vision" || r.JobName != "ddp" || len(r.GPUs) != 4 || r.State != "ended" {
		t.Errorf("job 501: %s %s %s, %d GPUs, %s", r.User, r.Team, r.JobName, len(r.GPUs), r.State)
	}
	if d := r.End.Sub(r.Start); d < 9*time.Hour-time.Minute || d > 9*time.Hour {
		t.Errorf("job 501 spans %s, ran 9h", d)
	}
	var idle int
	for _, g := range r.GPUs {
		if *g.UtilPeak == 0 {
			idle++
		}
	}
	if idle != 2 {
		t.Errorf("job 501: %d idle GPUs in the view, want 2", idle)
	}
}

// A job whose GPU was off the bus for most of its life gets "not enough
// data" with the reason, not figures taken as facts.
func TestNotEnoughData(t *testing.T) {
	t.Parallel()
	r := build(t, "504")
	if !strings.Contains(r.NotEnoughData, "cover only") || r.Coverage > 0.5 {
		t.Fatalf("coverage %.2f, verdict %q", r.Coverage, r.NotEnoughData)
	}
	ref, _ := jobview.ParseRef("999")
	if _, err := jobview.Build(context.Background(), jobview.Options{Querier: simStore(t), Now: origin.Add(12 * time.Hour), Lookback: 24 * time.Hour}, ref); err == nil || !strings.Contains(err.Error(), "no telemetry") {
		t.Fatalf("unknown job: %v", err)
	}
}

// The end-of-job summary carries the figures and findings through
// AdminComment within its size bound, and reads back.
func TestSummaryRoundTrip(t *testing.T) {
	t.Parallel()
	r := build(t, "501")
	s, err := jobview.EncodeSummary(r, "", 1024)
	if err != nil {
		t.Fatal(err)
	}
	if len(s) > 1024 || strings.ContainsAny(s, " \t\n\"'") || !strings.HasPrefix(s, jobview.SummaryPrefix) {
		t.Fatalf("summary %d bytes: %q", len(s), s)
	}
	back, err := jobview.DecodeSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	if back.Job != "501" || back.User != "alice" || len(back.GPUs) != 4 || !back.Start.Equal(r.Start.Truncate(time.Second)) ||
		len(back.Findings) != len(r.Findings) || back.Findings[0].Pattern != r.Findings[0].Pattern || back.Source != "admin_comment" {
		t.Fatalf("decoded %+v", back)
	}
	for i, g := range back.GPUs {
		if d := *g.UtilMean - *r.GPUs[i].UtilMean; d > 0.001 || d < -0.001 {
			t.Errorf("GPU %d util %v, was %v", i, *g.UtilMean, *r.GPUs[i].UtilMean)
		}
	}
	// sacctmgr stores the AdminComment lowercased: the summary survives it.
	if s != strings.ToLower(s) {
		t.Errorf("summary not in lower case: %q", s)
	}
	if up, err := jobview.DecodeSummary(jobview.SummaryPrefix + strings.ToUpper(strings.TrimPrefix(s, jobview.SummaryPrefix))); err != nil || len(up.GPUs) != 4 {
		t.Errorf("upper-cased summary: %v", err)
	}
	if !strings.Contains(back.Findings[0].Advice, "--gres=gpu:2") {
		t.Errorf("advice after decoding: %q", back.Findings[0].Advice)
	}
	// Bounded: a tiny budget drops detail, and what cannot fit is refused.
	small, err := jobview.EncodeSummary(r, "", 200)
	if err != nil || len(small) > 200 {
		t.Fatalf("small summary %d bytes: %v", len(small), err)
	}
	if _, err := jobview.EncodeSummary(r, "", 20); err == nil {
		t.Fatal("a 20-byte budget accepted")
	}
	for _, bad := range []string{"", "JS1:abc", jobview.SummaryPrefix + "!!", jobview.SummaryPrefix + "AAAA"} {
		if _, err := jobview.DecodeSummary(bad); err == nil {
			t.Errorf("decoded %q", bad)
		}
	}
}

// The three outputs carry the same report; JSON has the documented keys.
func TestFormats(t *testing.T) {
	t.Parallel()
	r := build(t, "503")
	var j bytes.Buffer
	if err := jobview.JSON(&j, r); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(j.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"job", "user", "team", "state", "start", "end", "window", "gpus", "findings", "totals", "coverage", "source"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	var txt, html bytes.Buffer
	if err := jobview.Text(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := jobview.HTML(&html, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"low_utilization", "MIG 1g.10gb", "carol"} {
		if !strings.Contains(txt.String(), want) || !strings.Contains(html.String(), want) {
			t.Errorf("text or HTML lacks %q", want)
		}
	}
	if !strings.ContainsAny(txt.String(), "▁▂▃▄▅▆▇█") || !strings.Contains(html.String(), "<svg") {
		t.Error("no sparklines")
	}
	checkJobPage(t, html.String())
}

var sparkRE = regexp.MustCompile(`<polyline[^>]* points="([^"]*)"/></svg> <small class="muted">([^<]*)</small>`)

// checkJobPage: the job's HTML page wears the analyzer page's styles, and
// each sparkline spans its own range (a job at 10-14 % drew a flat line on
// a 0..100 scale), labelled with it, or says it is flat.
func checkJobPage(t *testing.T, page string) {
	t.Helper()
	if !strings.Contains(page, "--accent:#2563eb") || !strings.Contains(page, `<header><div class="brand">`) {
		t.Error("the job page lacks the analyzer page's styles")
	}
	sparks := sparkRE.FindAllStringSubmatch(page, -1)
	if len(sparks) == 0 {
		t.Fatal("no sparklines on the job page")
	}
	for _, m := range sparks {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range strings.Fields(m[1]) {
			_, ys, _ := strings.Cut(p, ",")
			y, err := strconv.ParseFloat(ys, 64)
			if err != nil {
				t.Fatalf("point %q", p)
			}
			lo, hi = math.Min(lo, y), math.Max(hi, y)
		}
		switch flat := strings.HasPrefix(m[2], "flat at "); {
		case flat && hi-lo > 1e-9:
			t.Errorf("sparkline %q varies by %.1f px", m[2], hi-lo)
		case !flat && (hi-lo < 19 || !regexp.MustCompile(`^[\d.]+–[\d.]+ (%|GiB)$`).MatchString(m[2])):
			t.Errorf("sparkline %q spans %.1f of 24 px; want its own range, labelled", m[2], hi-lo)
		}
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]string{"123": `{hpc_job=~"(?:.*,)?123(?:,.*)?"}`, "12_3": `{hpc_job=~"(?:.*,)?12_3(?:,.*)?"}`,
		"ml/nb-0": `{namespace=~"(?:.*,)?ml(?:,.*)?",pod=~"(?:.*,)?nb-0(?:,.*)?"}`, "ml/nb.0": `{namespace=~"(?:.*,)?ml(?:,.*)?",pod=~"(?:.*,)?nb\\.0(?:,.*)?"}`} {
		r, err := jobview.ParseRef(in)
		if err != nil || r.Selector() != want {
			t.Errorf("%s: %v %q", in, err, r.Selector())
		}
	}
	for _, bad := range []string{"", "x", "1;2", `a/b"}`, "A/b", "ns/", "/pod", "12 3"} {
		if _, err := jobview.ParseRef(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestSelectorFindsJoinedHolders: a shared GPU's series name every holder
// in one label, joined with commas; the job's selector picks the job out
// of such a list, and never a job whose id holds its id.
func TestSelectorFindsJoinedHolders(t *testing.T) {
	r, err := jobview.ParseRef("123")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(r.Selector())
	if err != nil || len(ms) != 1 {
		t.Fatalf("selector %q: %v", r.Selector(), err)
	}
	for v, want := range map[string]bool{"123": true, "7,123": true, "123,7": true, "1,123,7": true, "123,+2": true,
		"1234": false, "12": false, "7,1234": false, "0123,7": false, "": false} {
		if got := ms[0].Matches(v); got != want {
			t.Errorf("hpc_job=%q: matched %v, want %v", v, got, want)
		}
	}
}

var tempDirs []string

func mkdirTemp() (string, error) {
	d, err := os.MkdirTemp("", "jobview-")
	tempDirs = append(tempDirs, d)
	return d, err
}

func TestMain(m *testing.M) {
	// The Slurm commands the tests and the commands they run call read
	// SLURM_CONF: set once here, before any test, so that the Slurm tests
	// need not set it themselves and may run in parallel.
	if conf := os.Getenv("GPUWATCH_SLURM_CONF"); conf != "" {
		os.Setenv("SLURM_CONF", conf)
	}
	code := m.Run()
	if store != nil {
		store.Close()
	}
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// Names come from users and schedulers: a job name cannot drive the
// terminal, and the HTML escapes it.
func TestForeignTextIsInert(t *testing.T) {
	s, err := jobview.EncodeSummary(&jobview.Report{Job: "77", JobName: "x\x1b]0;owned\x07\x1b[31mred<script>"}, "", 1024)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobview.DecodeSummary(s)
	if err != nil {
		t.Fatal(err)
	}
	var txt, html bytes.Buffer
	if err := jobview.Text(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := jobview.HTML(&html, r); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(txt.String(), "\x1b\x07") || !strings.Contains(txt.String(), "red<script>") {
		t.Errorf("text: %q", txt.String())
	}
	if strings.Contains(html.String(), "<script>") {
		t.Error("HTML carries the name unescaped")
	}
}
