package dashboards

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"

	"github.com/gpuwatch/gpuwatch/internal/cataloguetest"
	"github.com/gpuwatch/gpuwatch/internal/promqltest"
	"github.com/gpuwatch/gpuwatch/rules"
	"github.com/gpuwatch/gpuwatch/schema"
)

var update = flag.Bool("update", false, "rewrite dashboards/generated/ from the builders")

const generatedDir = "generated"

func rendered(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(All()) {
		t.Fatalf("rendered %d dashboards, want %d", len(files), len(All()))
	}
	return files
}

// TestGeneratedUpToDate fails when the committed JSON differs from what the
// builders produce. Fix: go run ./cmd/gpuwatch dashboards --out dashboards/generated
// (or go test ./dashboards -run TestGeneratedUpToDate -update).
func TestGeneratedUpToDate(t *testing.T) {
	files := rendered(t)
	if *update {
		if _, err := Write(generatedDir); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(generatedDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("%s/%s is not produced by any builder: delete it", generatedDir, e.Name())
		}
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(generatedDir, name))
		if err != nil {
			t.Errorf("%v: run `go run ./cmd/gpuwatch dashboards --out dashboards/generated`", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s is out of date: run `go run ./cmd/gpuwatch dashboards --out dashboards/generated`", generatedDir, name)
		}
	}
}

func TestMarshalKeepsPromQLReadable(t *testing.T) {
	for name, data := range rendered(t) {
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if bytes.Contains(data, []byte(esc)) {
				t.Errorf("%s contains HTML-escaped %s", name, esc)
			}
		}
	}
}

func allQueries(t *testing.T) []Query {
	t.Helper()
	var out []Query
	for name, data := range rendered(t) {
		qs, err := Queries(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(qs) == 0 {
			t.Fatalf("%s has no queries", name)
		}
		out = append(out, qs...)
	}
	return out
}

// TestEveryMetricInCatalogue: a dashboard may only read catalogue metrics
// and the shipped recording rules.
func TestEveryMetricInCatalogue(t *testing.T) {
	recorded := recordedRules(t)
	for _, q := range allQueries(t) {
		names, err := promqltest.MetricNames(q.Expr)
		if err != nil {
			t.Fatalf("%s / %s: %v", q.Dashboard, q.Panel, err)
		}
		if len(names) == 0 {
			t.Errorf("%s / %s: no metric in %q", q.Dashboard, q.Panel, q.Expr)
		}
		for _, n := range names {
			if _, ok := schema.Lookup(n); !ok && !recorded[n] {
				t.Errorf("%s / %s reads %s, which is neither in the schema catalogue nor a recording rule", q.Dashboard, q.Panel, n)
			}
		}
	}
}

func recordedRules(t *testing.T) map[string]bool {
	t.Helper()
	names, err := rules.Recorded()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}

// TestEveryRecordingRuleHasAConsumer: a recording rule costs Prometheus an
// evaluation every interval, so each must be read by a shipped alert, a
// dashboard or the capacity planner (its hourly figures).
func TestEveryRecordingRuleHasAConsumer(t *testing.T) {
	read := map[string]bool{}
	for f := hourly.Figure(0); f < hourly.Figures; f++ {
		read[hourly.Record(f)] = true
	}
	for _, q := range allQueries(t) {
		names, _ := promqltest.MetricNames(q.Expr)
		for _, n := range names {
			read[n] = true
		}
	}
	f, err := rules.Load(rules.AlertsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			names, err := promqltest.MetricNames(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			for _, n := range names {
				read[n] = true
			}
		}
	}
	for n := range recordedRules(t) {
		if !read[n] {
			t.Errorf("recording rule %s is read by no alert, no dashboard and not the planner", n)
		}
	}
}

// TestHostInEveryLegend: a graph's series must say where they come from: the
// node, or for a team-level figure the team; only a single fleet-wide series
// may have a plain name.
func TestHostInEveryLegend(t *testing.T) {
	byTeam := regexp.MustCompile(`^sum by \(team\)`)
	// The planner's figures are per node pool, a set of nodes: no one host.
	byPool := regexp.MustCompile(`^(sum|min) by \(pool\)`)
	for _, q := range allQueries(t) {
		if q.PanelType != "timeseries" && q.PanelType != "state-timeline" {
			continue
		}
		switch {
		case strings.Contains(q.Legend, "{{hostname}}"):
		case byTeam.MatchString(q.Expr) && strings.HasPrefix(q.Legend, "{{team}}"):
		case byPool.MatchString(q.Expr) && strings.HasPrefix(q.Legend, "{{pool}}"):
		case strings.HasPrefix(q.Expr, "count(") && !strings.Contains(q.Legend, "{{"):
		default:
			t.Errorf("%s / %s %s: legend %q names neither the node nor the team", q.Dashboard, q.Panel, q.RefID, q.Legend)
		}
	}
}

// TestCostUsesModelPrices: per-model prices become variables, longest model
// first, and the cost query multiplies each model's GPUs by its own.
func TestCostUsesModelPrices(t *testing.T) {
	files, err := RenderWith(Options{DefaultPrice: 2, Prices: map[string]float64{"H100": 4, "H100 NVL": 5.5}})
	if err != nil {
		t.Fatal(err)
	}
	data := files["gpuwatch-team.json"]
	vs, err := Variables(data)
	if err != nil {
		t.Fatal(err)
	}
	prices := map[string]string{}
	for _, v := range vs {
		if v.Type == "textbox" {
			prices[v.Name] = v.Query
		}
	}
	if want := map[string]string{"price": "2", "price_1": "5.5", "price_2": "4"}; !reflect.DeepEqual(prices, want) {
		t.Errorf("price variables %v, want %v", prices, want)
	}
	qs, err := Queries(data)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range qs {
		if q.Panel != "Cost per hour by team" {
			continue
		}
		found = true
		want := "sum by (team) ((team_modelName:gpuwatch_allocated_gpus:count{team=~\"$team\", modelName=~`.*H100 NVL.*`} * $price_1) or " +
			"(team_modelName:gpuwatch_allocated_gpus:count{team=~\"$team\", modelName=~`.*H100.*`} * $price_2) or " +
			"(team_modelName:gpuwatch_allocated_gpus:count{team=~\"$team\"} * $price))"
		if q.Expr != want {
			t.Errorf("cost query\n%s\nwant\n%s", q.Expr, want)
		}
		if _, err := promqltest.MetricNames(q.Expr); err != nil {
			t.Error(err)
		}
	}
	if !found {
		t.Fatal("no cost panel")
	}
}

// TestHardwarePanelsWorkOnDCGMExporter: a query that reads only dcgm-exporter
// metrics must not filter on labels that only gpuwatch publishes.
func TestHardwarePanelsWorkOnDCGMExporter(t *testing.T) {
	gpuwatchOnly := regexp.MustCompile(`\$` + varTeam + `\b|\$` + varJob + `\b|\b(team|job_id|kind|user)\b`)
	n := 0
	for _, q := range allQueries(t) {
		names, _ := promqltest.MetricNames(q.Expr)
		dcgmOnly := len(names) > 0
		for _, name := range names {
			if m, _ := schema.Lookup(name); m == nil || !m.DCGM {
				dcgmOnly = false
			}
		}
		if !dcgmOnly {
			continue
		}
		n++
		if gpuwatchOnly.MatchString(q.Expr) {
			t.Errorf("%s / %s: hardware query needs gpuwatch labels: %s", q.Dashboard, q.Panel, q.Expr)
		}
	}
	if n < 20 {
		t.Errorf("only %d dcgm-exporter-only queries; the hardware panels went missing", n)
	}
}

func TestPanelStructure(t *testing.T) {
	for name, data := range rendered(t) {
		d, err := parse(data)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("%s: panel %q has id %d, duplicate or unset", name, p.Title, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" && !p.Collapsed && len(p.Panels) > 0 {
				t.Errorf("%s: expanded row %q holds panels; Grafana only shows top-level panels there", name, p.Title)
			}
			if (p.Type == "timeseries" || p.Type == "state-timeline") && (p.Options.Tooltip == nil || p.Options.Tooltip.Mode == "") {
				t.Errorf("%s: %s %q has no tooltip mode", name, p.Type, p.Title)
			}
			if p.Type == "stat" && (p.Options.ReduceOptions == nil || len(p.Options.ReduceOptions.Calcs) == 0) {
				t.Errorf("%s: stat %q has no explicit reduce calculation", name, p.Title)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s / %s: refId %q empty or repeated", name, p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
		}
	}
}

var (
	labelValues = regexp.MustCompile(`^label_values\((.+), ([a-zA-Z_]+)\)$`)
	queryResult = regexp.MustCompile(`^query_result\((.+)\)$`)
)

// TestVariables: every dashboard has the same variables, each reading
// catalogue series; a query_result variable extracts the label it is named
// after.
func TestVariables(t *testing.T) {
	want := []string{varDatasource, varHostname, varGPU, varTeam, varJob}
	for name, data := range rendered(t) {
		vs, err := Variables(data)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.Name)
			if v.Type != "query" {
				continue
			}
			var expr string
			if m := labelValues.FindStringSubmatch(v.Query); m != nil {
				expr = m[1]
			} else if m := queryResult.FindStringSubmatch(v.Query); m != nil {
				expr = m[1]
				if v.Regex != fmt.Sprintf(`/%s="([^"]+)"/`, v.Name) {
					t.Errorf("%s: variable %s regex %q does not extract label %s", name, v.Name, v.Regex, v.Name)
				}
			} else {
				t.Errorf("%s: variable %s query %q is neither label_values nor query_result", name, v.Name, v.Query)
				continue
			}
			names, err := promqltest.MetricNames(expr)
			if _, ok := schema.Lookup(strings.Join(names, "")); err != nil || len(names) != 1 || !ok {
				t.Errorf("%s: variable %s query %q: names %v, %v", name, v.Name, v.Query, names, err)
			}
		}
		w := want
		if name == "gpuwatch-team.json" {
			w = append(append([]string{}, want...), varPrice)
		}
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("%s: variables %v, want %v", name, got, w)
		}
	}
}

// TestNodeDashboardShowsEveryGPUMetric: the node dashboard plots every
// per-GPU hardware metric of the catalogue, so a metric added there shows up.
func TestNodeDashboardShowsEveryGPUMetric(t *testing.T) {
	d, err := Node()
	if err != nil {
		t.Fatal(err)
	}
	data, err := Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := Queries(data)
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{}
	for _, q := range qs {
		names, _ := promqltest.MetricNames(q.Expr)
		for _, n := range names {
			read[n] = true
		}
	}
	for _, m := range schema.All() {
		if m.PerGPU && (m.Origin == schema.OriginNVML || m.Origin == schema.OriginGPM) && !read[m.Name] {
			t.Errorf("node dashboard does not show %s", m.Name)
		}
	}
}

func TestUnescapeHTML(t *testing.T) {
	tests := []struct{ in, want string }{
		{`"a \u003e 1 \u0026\u0026 b \u003c 2"`, `"a > 1 && b < 2"`},
		{`"literal \\u003e stays"`, `"literal \\u003e stays"`},
		{`"\u00e9 and \n"`, `"\u00e9 and \n"`},
		{`"trailing \`, `"trailing \`},
	}
	for _, tc := range tests {
		if got := string(unescapeHTML([]byte(tc.in))); got != tc.want {
			t.Errorf("unescapeHTML(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestWriteCreatesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	paths, err := Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(All()) {
		t.Fatalf("wrote %d files, want %d", len(paths), len(All()))
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			t.Error(err)
		}
	}
	// A file where the directory should be is an error, not a panic.
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(blocked); err == nil {
		t.Error("Write into a regular file: no error")
	}
}

func BenchmarkRender(b *testing.B) {
	for b.Loop() {
		if _, err := Render(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNamesComeFromCatalogue renames every catalogue metric and renders the
// dashboards again: a name still in the output was spelled as a literal.
func TestNamesComeFromCatalogue(t *testing.T) {
	originals := cataloguetest.RenameAll(t)
	files, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if lit := cataloguetest.Literals(data, originals); len(lit) > 0 {
			t.Errorf("%s spells catalogue names as literals instead of reading the catalogue: %v", name, lit)
		}
	}
}

// TestCountersAsRates: no graph plots a counter's raw total, which only says
// how long the exporter has run; rates and increases say what happens. (A
// health table may show a current count: any non-zero is the news there.)
func TestCountersAsRates(t *testing.T) {
	isCounter := func(n string) bool {
		m, ok := schema.Lookup(n)
		return ok && m.Type == schema.Counter
	}
	for _, q := range allQueries(t) {
		if q.PanelType != "timeseries" && q.PanelType != "state-timeline" {
			continue
		}
		raw, err := promqltest.OutsideRange(q.Expr, isCounter)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > 0 {
			t.Errorf("%s / %s %s plots counters as raw totals: %v", q.Dashboard, q.Panel, q.RefID, raw)
		}
	}
}
