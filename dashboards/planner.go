package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	c "github.com/gpuwatch/gpuwatch/schema"
)

// Planner shows the capacity planner's last plan (the gpuwatch_planner_*
// gauges an analyzer publishes after each plan): GPUs held against GPUs
// needed and freeable per node pool and per team, the GPUs whose demand is
// unknown (kept as needed), the window's coverage and the forecast peak.
// Every figure is the plan of one window, which the summary row states.
func Planner() (dashboard.Dashboard, error) {
	pool := func(m *c.Metric) string { return fmt.Sprintf("sum by (%s) (%s)", c.LabelPool, m.Name) }
	teams := fmt.Sprintf(`%s=~"$%s"`, c.LabelTeam, varTeam)
	team := func(m *c.Metric) string { return fmt.Sprintf("sum by (%s) (%s)", c.LabelTeam, sel(m, teams)) }
	fleet := func(m *c.Metric) string { return fmt.Sprintf("sum(%s)", m.Name) }
	return finish(newDashboard("gpuwatch-planner", "gpuwatch / Capacity planner",
		"GPUs held against GPUs needed and freeable per node pool and team, from the planner's last window, with its coverage and the demand forecast.", false).
		WithRow(row("Last plan")).
		WithPanel(singleStat("GPUs held", "GPUs an allocation held at some time in the planner's window, over every pool.", "short",
			query(fleet(c.PlannerGPUsHeld), ""))).
		WithPanel(singleStat("GPUs needed", "GPUs the held work needs when packed into MIG slices or time-shared, GPUs of unknown demand included.", "short",
			query(fleet(c.PlannerGPUsNeeded), ""))).
		WithPanel(singleStat("GPUs that could be freed", "Held minus needed; GPUs whose demand is unknown are never counted.", "short",
			query(fleet(c.PlannerGPUsFreeable), ""))).
		WithPanel(singleStat("GPUs of unknown demand", "GPUs held by allocations whose demand the planner could not read; kept as needed.", "short",
			query(fleet(c.PlannerGPUsUnknown), ""))).
		WithPanel(singleStat("Window", "Length of the planner's window: every figure on this dashboard is over it.", "s",
			query(fmt.Sprintf("max(%s)", c.PlannerWindowSeconds.Name), ""))).
		WithPanel(singleStat("Window ended", "Time since the end of the last plan's window.", "s",
			query(fmt.Sprintf("time() - max(%s)", c.PlannerLastPlan.Name), ""))).
		WithRow(row("Node pools")).
		WithPanel(timeSeries("GPUs held and needed by pool", "Per node pool: GPUs held, GPUs the plan needs, and those that could be freed.", "short", 12,
			query(pool(c.PlannerGPUsHeld), "{{pool}} held"),
			query(pool(c.PlannerGPUsNeeded), "{{pool}} needed"),
			query(pool(c.PlannerGPUsFreeable), "{{pool}} freeable"))).
		WithPanel(timeSeries("Forecast peak and coverage by pool", "The highest hourly number of allocated GPUs the forecast expects next week, and the share of expected samples the window held.", "short", 12,
			query(pool(c.PlannerForecastPeakGPUs), "{{pool}} forecast peak"),
			query(fmt.Sprintf("min by (%s) (%s)", c.LabelPool, c.PlannerCoverage.Name), "{{pool}} coverage"))).
		WithPanel(tableOf("Pools", "The last plan per node pool.", 24,
			[]string{"Held", "Needed", "Freeable", "Unknown demand", "Coverage", "Forecast peak"},
			instant(pool(c.PlannerGPUsHeld)), instant(pool(c.PlannerGPUsNeeded)), instant(pool(c.PlannerGPUsFreeable)),
			instant(pool(c.PlannerGPUsUnknown)), instant(fmt.Sprintf("min by (%s) (%s)", c.LabelPool, c.PlannerCoverage.Name)),
			instant(pool(c.PlannerForecastPeakGPUs)))).
		WithRow(row("Teams")).
		WithPanel(timeSeries("GPUs held and needed by team", "Per team: GPUs held, GPUs needed when the team's work is packed on its own per pool, and those it could free.", "short", 24,
			query(team(c.PlannerTeamGPUsHeld), "{{team}} held"),
			query(team(c.PlannerTeamGPUsNeeded), "{{team}} needed"),
			query(team(c.PlannerTeamGPUsFreeable), "{{team}} freeable"))).
		WithPanel(tableOf("Teams", "The last plan per team.", 24, []string{"Held", "Needed", "Freeable"},
			instant(team(c.PlannerTeamGPUsHeld)), instant(team(c.PlannerTeamGPUsNeeded)), instant(team(c.PlannerTeamGPUsFreeable)))).
		Build())
}
