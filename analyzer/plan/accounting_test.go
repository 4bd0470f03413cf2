package plan_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/web"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// teamsFleet: two teams' services and an idle notebook of a third on one
// node, a day long, so the teams' accounting has use and waste in it; the
// third team also time-slices GPU 3 between an idle notebook and a
// training run (each holder's own use published).
const teamsFleet = `
name: plan-teams
origin: 2026-11-02T00:00:00Z
fleet: [{hostname: node-t, model: H100-SXM5-80GB, gpus: 4}]
workloads:
  - {id: chat-0, scheduler: kubernetes, namespace: chat, user: svc, team: chat, kind: service, node: node-t, gpus: [0], start: -1h, end: 2d, behaviour: inference_daily}
  - {id: score-0, scheduler: kubernetes, namespace: scoring, user: svc, team: scoring, kind: service, node: node-t, gpus: [1], start: -1h, end: 2d, behaviour: inference_daily, params: {phase: 12h}}
  - {id: jupyter-ann, scheduler: kubernetes, namespace: lab, user: ann, team: lab, node: node-t, gpus: [2], start: 1h, duration: 20h, behaviour: idle_notebook}
  - {id: jupyter-bo, scheduler: kubernetes, namespace: lab, user: bo, team: lab, kind: interactive, node: node-t, gpus: [3], shared: true, start: 1h, duration: 20h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
  - {id: train-cy, scheduler: kubernetes, namespace: lab, user: cy, team: lab, kind: batch, node: node-t, gpus: [3], shared: true, start: 1h, duration: 20h, behaviour: training, params: {util: 40, memory_gib: 8}}
`

// TestTeamGPUHoursAreTheAccountings: given the analyzer's records (the
// store its cycles wrote), the plan's team view shows the GPU-hours of
// analyzer/accounting, the same the weekly report's team rows and the web
// page's Planner tab show for the window; without them it shows none of
// its own.
func TestTeamGPUHoursAreTheAccountings(t *testing.T) {
	t.Parallel()
	sc, err := sim.ParseScenario("plan-teams", []byte(teamsFleet))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app := db.Appender()
	span := 24 * time.Hour
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 3, Origin: sc.Origin, To: span + time.Hour, Resolution: time.Minute},
		func(ts time.Time, fams []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, fams) }); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "gpuwatch.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e, err := engine.New(engine.Options{Querier: db, Store: st, Config: config.Default(), WarmUp: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for at := sc.Origin.Add(10 * time.Minute); !at.After(sc.Origin.Add(span + time.Hour)); at = at.Add(10 * time.Minute) {
		if _, err := e.Cycle(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	from, to := sc.Origin, sc.Origin.Add(span)
	p, err := plan.Build(ctx, db, from, to, plan.Options{Books: accounting.Books{Records: st}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &report.Config{}
	cfg.Defaults()
	rep, err := (&report.Builder{Data: st, Config: cfg, Now: func() time.Time { return to }}).Build(ctx, report.DayOf(from, cfg.Location()), "")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]report.TeamRow{}
	for _, r := range rep.Teams {
		rows[r.Team] = r
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.05 }
	wasted := 0.0
	for _, tm := range p.Teams {
		if tm.Team == plan.NoTeam {
			continue
		}
		r, ok := rows[tm.Team]
		if tm.GPUHours == nil || !ok {
			t.Fatalf("team %s: plan GPU-hours %v, report row found %v", tm.Team, tm.GPUHours, ok)
		}
		g := tm.GPUHours
		t.Logf("team %s: plan %.2f allocated, %.2f used, %.2f wasted; report %.2f, %.2f, %.2f", tm.Team, g.Allocated, g.Used, g.Wasted,
			r.AllocatedGPUHours, r.ActiveGPUHours, r.WastedGPUHours)
		if !near(g.Allocated, r.AllocatedGPUHours) || !near(g.Used, r.ActiveGPUHours) || !near(g.Wasted, r.WastedGPUHours) {
			t.Errorf("team %s: the plan's GPU-hours %+v differ from the report's row %+v", tm.Team, *g, r)
		}
		wasted += g.Wasted
	}
	if len(rows) != 3 || wasted <= 0 {
		t.Errorf("%d report teams, %.2f GPU-hours wasted in the plan; want 3 teams and the notebook's waste", len(rows), wasted)
	}
	sharedPlanAndReportAgree(t, p, rep)
	srv := httptest.NewServer(web.Handler(web.Options{Planner: windowSource{&plan.Source{Querier: db, Options: plan.Options{Books: accounting.Books{Records: st}}}, from, to}}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/planner")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Shared GPUs: team lab held") {
		t.Errorf("planner page lacks lab's shares of shared GPUs")
	}
	for _, tm := range p.Teams {
		if tm.GPUHours == nil {
			continue
		}
		for _, v := range []float64{tm.GPUHours.Allocated, tm.GPUHours.Used, tm.GPUHours.Wasted} {
			if s := fmt.Sprintf("%.1f", v); !strings.Contains(string(body), s) {
				t.Errorf("planner page lacks team %s's %s GPU-hours", tm.Team, s)
			}
		}
	}
}

// sharedPlanAndReportAgree: the pooling view counts the shares each team
// reserved on shared GPUs and used, as the report's shared holders list
// them: lab's two holders of GPU 3 (the idle notebook's share wasted, the
// training's used), no shared hours for the teams with GPUs of their own.
func sharedPlanAndReportAgree(t *testing.T, p *plan.Plan, rep *report.Report) {
	t.Helper()
	var alloc, used, wasted float64
	holders := 0
	for _, r := range rep.Shared {
		if r.Team == "lab" {
			alloc, used, wasted = alloc+r.AllocatedGPUHours, used+r.ActiveGPUHours, wasted+r.WastedGPUHours
			holders++
		}
	}
	if holders != 2 {
		t.Fatalf("report's shared holders %+v, want lab's two holders of GPU 3", rep.Shared)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.05 }
	for _, tm := range p.Teams {
		s := tm.SharedGPUHours
		switch {
		case tm.Team != "lab":
			if s != nil {
				t.Errorf("team %s held no shared GPU, plan says %+v", tm.Team, *s)
			}
		case s == nil:
			t.Errorf("team lab: no shared GPU-hours in the plan")
		case !near(s.Allocated, alloc) || !near(s.Used, used) || !near(s.Wasted, wasted) || s.Wasted <= 0 || s.Used <= 0:
			t.Errorf("team lab's shares: plan %+v, report %.2f allocated %.2f used %.2f wasted; want equal, with use and waste", *s, alloc, used, wasted)
		}
	}
	var text strings.Builder
	if err := plan.Table(&text, p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Shared GPUs: team lab held") {
		t.Errorf("the plan's text lacks lab's shares:\n%s", text.String())
	}
}
