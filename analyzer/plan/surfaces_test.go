package plan_test

import (
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/web"
	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// windowSource hands the web page the plan of one fixed window.
type windowSource struct {
	src      *plan.Source
	from, to time.Time
}

func (w windowSource) Plan(ctx context.Context) (*plan.Plan, error) {
	return w.src.PlanBetween(ctx, w.from, w.to)
}

// TestSurfacesAgree: the fleet report, the Planner tab, the
// gpuwatch_planner_* metrics and the planner dashboard's tables show the same held, needed and freeable GPUs
// and coverage for the same window, planned from real telemetry.
func TestSurfacesAgree(t *testing.T) {
	t.Parallel()
	sc, err := sim.Builtin("planner-daynight")
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	app := db.Appender()
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 17, Origin: sc.Origin, To: 24 * time.Hour, Resolution: 5 * time.Minute},
		func(ts time.Time, fams []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, fams) }); err != nil {
		t.Fatal(err)
	}
	// The report's period is a day in UTC: the window every surface plans.
	cfg := &report.Config{}
	cfg.Defaults()
	period := report.DayOf(sc.Origin, cfg.Location())
	src := &plan.Source{Querier: db}
	st, err := store.Open(filepath.Join(t.TempDir(), "gpuwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := &report.Builder{Data: st, Config: cfg, Planner: src, Now: func() time.Time { return period.End }}
	fleet, err := b.Build(ctx, period, "")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := report.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	out, err := rd.Render(fleet, report.ImagesDataURI)
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.PlanBetween(ctx, period.Start, period.End)
	if err != nil {
		t.Fatal(err)
	}
	if p.Held != 16 || p.Needed != 8 {
		t.Fatalf("plan: %s; want 16 held, 8 needed", p.Headline())
	}
	want := map[string]int{"held": p.Held, "needed": p.Needed, "freeable": p.Freeable}
	// Report: text and HTML.
	txt := regexp.MustCompile(`(\d+) GPUs held, (\d+) needed, (\d+) could be freed`).FindStringSubmatch(out.Text)
	if txt == nil {
		t.Fatalf("report text has no capacity plan:\n%s", out.Text)
	}
	html := regexp.MustCompile(`<b>(\d+)</b> GPUs held, <b>(\d+)</b> needed, <b[^>]*>(\d+)</b> could be freed`).FindStringSubmatch(out.HTML)
	if html == nil {
		t.Fatalf("report HTML has no capacity plan")
	}
	// Web page.
	srv := httptest.NewServer(web.Handler(web.Options{Planner: windowSource{src, period.Start, period.End}}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/planner")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	card := func(id string) int {
		m := regexp.MustCompile(`id="` + id + `">(\d+)<`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("planner page lacks %s:\n%s", id, page)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	// Metrics.
	m := plan.NewMetrics()
	m.Observe(p)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	pool := p.Pools[0].Name
	metric := func(mm *schema.Metric) int {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != mm.Name {
				continue
			}
			for _, s := range mf.Metric {
				if s.GetLabel()[0].GetValue() == pool {
					return int(s.GetGauge().GetValue())
				}
			}
		}
		t.Fatalf("no %s{pool=%q}", mm.Name, pool)
		return -1
	}
	panel := dashboardTable(t, reg, "Pools", schema.LabelPool)
	for i, k := range []string{"held", "needed", "freeable"} {
		ti, _ := strconv.Atoi(txt[i+1])
		hi, _ := strconv.Atoi(html[i+1])
		got := map[string]int{"report text": ti, "report html": hi, "web": card(k),
			"metrics":   metric([]*schema.Metric{schema.PlannerGPUsHeld, schema.PlannerGPUsNeeded, schema.PlannerGPUsFreeable}[i]),
			"dashboard": int(panel[string(rune('A'+i))][pool])}
		for where, v := range got {
			if v != want[k] {
				t.Errorf("%s: %s %d, the plan says %d", where, k, v, want[k])
			}
		}
	}
	// The report prints shares with one decimal, the page whole percent.
	if cov := strconv.FormatFloat(100*p.Coverage, 'f', 1, 64) + "%"; !strings.Contains(out.Text, "coverage "+cov) {
		t.Errorf("report text lacks coverage %s", cov)
	}
	if !strings.Contains(page, p.Headline()) {
		t.Errorf("planner page lacks the headline %q", p.Headline())
	}
	teams := dashboardTable(t, reg, "Teams", schema.LabelTeam)
	for _, tm := range p.Teams {
		for i, want := range []int{tm.Held, tm.Needed, tm.Freeable} {
			if got := teams[string(rune('A'+i))][tm.Team]; int(got) != want {
				t.Errorf("dashboard team %s column %c: %g, the plan says %d", tm.Team, 'A'+i, got, want)
			}
		}
	}
	if testutil.ToFloat64(windowMetric(m)) != period.End.Sub(period.Start).Seconds() {
		t.Error("window metric is not the report's period")
	}
	if !strings.Contains(page, "<svg") {
		t.Error("planner page has no heat map picture")
	}
}

// dashboardTable scrapes reg into a store once, as Prometheus would, and
// evaluates the instant queries of the planner dashboard's table panel
// titled title with real PromQL: value by query refId and by the label by.
func dashboardTable(t *testing.T, reg *prometheus.Registry, title, by string) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	at := time.Now().Truncate(time.Minute)
	if err := db.Appender().AppendFamilies(ctx, at, mfs); err != nil {
		t.Fatal(err)
	}
	data, err := dashboards.Render()
	if err != nil {
		t.Fatal(err)
	}
	qs, err := dashboards.Queries(data["gpuwatch-planner.json"])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, q := range qs {
		if q.Panel != title {
			continue
		}
		v, err := db.Query(ctx, strings.ReplaceAll(q.Expr, "$team", ".*"), at)
		if err != nil {
			t.Fatalf("%s %s: %v", title, q.RefID, err)
		}
		out[q.RefID] = map[string]float64{}
		for _, s := range v.(model.Vector) {
			out[q.RefID][string(s.Metric[model.LabelName(by)])] = float64(s.Value)
		}
	}
	if len(out) == 0 {
		t.Fatalf("the planner dashboard has no table %q", title)
	}
	return out
}

// windowMetric picks the window gauge out of the collector.
func windowMetric(m *plan.Metrics) prometheus.Collector {
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		all := make(chan prometheus.Metric, 64)
		go func() { m.Collect(all); close(all) }()
		for x := range all {
			if strings.Contains(x.Desc().String(), schema.PlannerWindowSeconds.Name) {
				ch <- x
			}
		}
	})
}

type collectorFunc func(ch chan<- prometheus.Metric)

func (f collectorFunc) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }
