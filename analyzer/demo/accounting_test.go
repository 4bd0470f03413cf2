package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// figures are one surface's reading of the accounting, in GPU-hours.
type figures struct {
	allocated, used, wasted, overLimit, orphan, degraded float64
}

func (f figures) values() []float64 {
	return []float64{f.allocated, f.used, f.wasted, f.overLimit, f.orphan, f.degraded}
}

var measures = []string{"allocated", "used", "wasted", "over the limit", "orphan", "degraded"}

// num reads a number a surface printed.
func num(t *testing.T, where, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil {
		t.Fatalf("%s: %q is not a number", where, s)
	}
	return v
}

// match returns the submatches of re in s, failing when there are none.
func match(t *testing.T, where, re, s string) []string {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%s: no %s in:\n%s", where, re, s)
	}
	return m
}

// lineRE is the accounting's one sentence, as the terminal and analyze
// print it.
const lineRE = `GPU-hours: ([\d.,]+) allocated, ([\d.,]+) used, ([\d.,]+) wasted \([\d.,]+% of allocated\), ([\d.,]+) over the limit(?:; ([\d.,]+) degraded \(slowed by throttled or faulty GPUs\))?(?:; ([\d.,]+) more held by orphaned processes)?`

func fromLine(t *testing.T, where, s string) figures {
	m := match(t, where, lineRE, s)
	f := figures{num(t, where, m[1]), num(t, where, m[2]), num(t, where, m[3]), num(t, where, m[4]), 0, 0}
	if m[5] != "" {
		f.degraded = num(t, where, m[5])
	}
	if m[6] != "" {
		f.orphan = num(t, where, m[6])
	}
	return f
}

// TestAccountingIdentity runs the demo week and reads its GPU-hours off
// every surface a person sees: the terminal summary, the fleet report the
// demo wrote, the web page (findings page and reports page), `gpuwatch
// analyze` over the demo's telemetry store (table and JSON), and the
// analyzer's /metrics. Each shows the same allocated, used, wasted,
// over-limit and orphaned figures, to the tenth they print, and used plus
// wasted never exceeds allocated. The week before the demo's has no usage.
func TestAccountingIdentity(t *testing.T) {
	if testtool.Race {
		// Under -race it would simulate the small fleet's 30 hours, the
		// very simulation TestSimulateWritesEverything race-checks beside
		// it (a minute of race CPU each): its identity is arithmetic over
		// what the surfaces print, checked on the demo's whole week.
		t.Skip("the demo week's accounting identity runs without -race: scripts/test.sh runs it in its scale step; TestSimulateWritesEverything race-checks the simulation")
	}
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := t.TempDir()
	// The week `gpuwatch demo` simulates.
	sc := sim.DefaultScenario()
	d, err := New(Options{Scenario: sc, Seed: 1, Length: 7 * 24 * time.Hour, Origin: origin, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := d.Simulate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	surfaces := map[string]figures{}

	var term bytes.Buffer
	if err := WriteSummary(&term, res); err != nil {
		t.Fatal(err)
	}
	surfaces["terminal"] = fromLine(t, "terminal", term.String())
	// The demo week shows each thing that slows or ends a job.
	for _, want := range []string{"SLOWED OR ENDED BY GPUS", "straggler", "throttled", "XID 79, ended the job", "XID 13, the job's own code"} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("the demo's summary lacks %q", want)
		}
	}

	fleet := readFile(t, filepath.Join(out, "reports", "fleet.html"))
	m := match(t, "fleet report", `([\d.,]+) GPU-hours wasted, [\d.,]+% of ([\d.,]+) allocated\.`, fleet)
	rep := figures{wasted: num(t, "report", m[1]), allocated: num(t, "report", m[2])}
	rep.used = num(t, "report", match(t, "fleet report", `>([\d.,]+)</div>\s*<div[^>]*>GPU-hours active<`, fleet)[1])
	rep.overLimit = num(t, "report", match(t, "fleet report", `<b>([\d.,]+)</b> GPU-hours over the limit`, fleet)[1])
	rep.orphan = num(t, "report", match(t, "fleet report", `<b>([\d.,]+)</b> GPU-hours orphaned`, fleet)[1])
	// The report names degraded GPU-hours only when there are some.
	if m := regexp.MustCompile(`<b>([\d.,]+)</b> GPU-hours degraded`).FindStringSubmatch(fleet); m != nil {
		rep.degraded = num(t, "report", m[1])
	}
	surfaces["report"] = rep

	h, err := d.Handler(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(b)
	}
	home := get("/")
	page := match(t, "web page", `(?s)<p id="accounting">.*?</p>`, home)[0]
	// The straggler's node heads the fleet-health ranking.
	health := match(t, "web page", `(?s)<table id="fleet-health">.*?</table>`, home)[0]
	if !strings.Contains(health, ">a100-01</a>") {
		t.Errorf("the web page's fleet health lacks the straggler's node a100-01:\n%s", health)
	}
	var web figures
	for i, class := range []string{"allocated", "used", "wasted", "over-limit", "orphan", "degraded"} {
		v := num(t, "web page", match(t, "web page", `<b class="`+class+`">([\d.,]+)</b>`, page)[1])
		*[]*float64{&web.allocated, &web.used, &web.wasted, &web.overLimit, &web.orphan, &web.degraded}[i] = v
	}
	surfaces["web page"] = web
	// The cards above that sentence say the same: waste apart from the
	// orphaned processes' hours (the card said 423.5, the sentence 405.5),
	// the overlong bar in hours over the limit (it said "0.0 h · 2"), and
	// distinct GPUs (it said 99 on a 32-GPU fleet).
	for _, c := range []struct {
		re   string
		want float64
	}{
		{`<b id="wasted">([\d.,]+)</b>`, web.wasted},
		{`<span class="more" id="orphaned">([\d.,]+)</span> more held by orphaned processes`, web.orphan},
		{`([\d.,]+) h over the limit · \d+`, web.overLimit},
	} {
		if got := num(t, "web cards", match(t, "web cards", c.re, home)[1]); math.Abs(got-c.want) > 0.05+1e-9 {
			t.Errorf("web cards: %s is %.1f, the accounting sentence below %.1f", c.re, got, c.want)
		}
	}
	fleetGPUs := 0
	for _, n := range sc.Nodes {
		fleetGPUs += n.GPUs
	}
	if gpus := num(t, "web cards", match(t, "web cards", `<span id="gpus">(\d+)</span> distinct GPUs`, home)[1]); gpus < 1 || gpus > float64(fleetGPUs) {
		t.Errorf("web cards: %.0f GPUs on a fleet of %d", gpus, fleetGPUs)
	}
	row := match(t, "web reports", `(?s)Fleet \(administrators\)</a></td>.*?</tr>`, get("/reports"))[0]
	cells := regexp.MustCompile(`<td class="num">(?:<b>)?([\d.,]+)`).FindAllStringSubmatch(row, -1)
	if len(cells) != 7 {
		t.Fatalf("web reports: fleet row %q", row)
	}
	surfaces["web reports"] = figures{num(t, "web reports", cells[0][1]), num(t, "web reports", cells[1][1]),
		num(t, "web reports", cells[2][1]), num(t, "web reports", cells[4][1]), num(t, "web reports", cells[6][1]), num(t, "web reports", cells[5][1])}

	db, err := embedded.Open(filepath.Join(out, "tsdb"), embedded.Options{Retention: 30 * 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// gpuwatch analyze given the site's configuration (its run-time limits).
	e, err := engine.New(engine.Options{Querier: db, Config: SiteConfig()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(ctx, res.Origin, res.End)
	if err != nil {
		t.Fatal(err)
	}
	var table, js bytes.Buffer
	if err := present.Table(&table, a.Findings, &a.Coverage, a.Book); err != nil {
		t.Fatal(err)
	}
	surfaces["analyze"] = fromLine(t, "analyze", table.String())
	if err := present.JSON(&js, a.Findings, &a.Coverage, a.Book); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Accounting accounting.Totals `json:"accounting"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	x := doc.Accounting
	surfaces["analyze json"] = figures{x.Allocated, x.Used, x.Wasted, x.OverLimit, x.Orphan, x.Degraded}

	reg := prometheus.NewRegistry()
	reg.MustRegister(d.seen)
	mrec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(mrec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(mrec.Body)
	if err != nil {
		t.Fatal(err)
	}
	byMeasure := map[string]float64{}
	fam := fams[schema.AnalyzerAccountedGPUSeconds.Name]
	if fam == nil {
		t.Fatalf("/metrics lacks %s", schema.AnalyzerAccountedGPUSeconds.Name)
	}
	for _, s := range fam.Metric {
		byMeasure[s.Label[0].GetValue()] = s.GetGauge().GetValue() / 3600
	}
	surfaces["metrics"] = figures{byMeasure[schema.MeasureAllocated], byMeasure[schema.MeasureUsed], byMeasure[schema.MeasureWasted],
		byMeasure[schema.MeasureOverLimit], byMeasure[schema.MeasureOrphan], byMeasure[schema.MeasureDegraded]}

	ref := surfaces["terminal"]
	if ref.allocated <= 0 || ref.wasted <= 0 || ref.overLimit <= 0 || ref.orphan <= 0 || ref.used <= 0 || ref.degraded <= 0 {
		t.Fatalf("the demo week lacks a figure: %+v\n%s", ref, term.String())
	}
	for name, f := range surfaces {
		if f.used+f.wasted > f.allocated+0.1 {
			t.Errorf("%s: used %.2f + wasted %.2f > allocated %.2f", name, f.used, f.wasted, f.allocated)
		}
		for i, v := range f.values() {
			// The terminal prints tenths: every surface rounds to it.
			if math.Abs(v-ref.values()[i]) > 0.05+1e-9 {
				t.Errorf("%s shows %.3f GPU-hours %s, the terminal %.1f", name, v, measures[i], ref.values()[i])
			}
		}
	}
	t.Logf("the demo week on every surface: %.1f allocated, %.1f used, %.1f wasted, %.1f over the limit, %.1f orphaned",
		ref.allocated, ref.used, ref.wasted, ref.overLimit, ref.orphan)

	// The week boundary: the report's trend shows no usage in the week
	// before the demo's (under -race, the 30 hours before), which had none.
	tr := res.Fleet.Trend
	if len(tr) < 2 || tr[len(tr)-2].AllocatedGPUHours != 0 || tr[len(tr)-2].WastedGPUHours != 0 {
		t.Errorf("the week before the demo's shows usage: %+v", tr)
	}
}
