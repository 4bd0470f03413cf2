package dashboards

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/gpuwatch/gpuwatch/rules"
	c "github.com/gpuwatch/gpuwatch/schema"
)

// varPrice is the default price per GPU-hour; per-model prices are
// varPrice_1, varPrice_2, ...
const varPrice = "price"

// Team shows the pooling of GPUs between teams over time (allocated, used,
// idle and wasted, plus unallocated capacity) and its cost, then per team
// and job the GPUs held against the GPUs used and how efficiently they are
// used over time.
func Team(opts Options) (dashboard.Dashboard, error) {
	jobLegend := "{{hostname}} {{team}} {{job_id}}"
	busy := fmt.Sprintf("(%s > %d)", sel(c.GPUUtil, hw), rules.BusyUtil)
	jobCPU := sel(c.JobCPUSeconds, fmt.Sprintf(`%s=~"$%s", %s=~"$%s"`, c.LabelHostname, varHostname, c.LabelJob, varJob))
	teams := fmt.Sprintf(`%s=~"$%s"`, c.LabelTeam, varTeam)
	byTeam := func(r rules.Rule) string { return fmt.Sprintf("sum by (%s) (%s{%s})", c.LabelTeam, r.Record, teams) }
	cost := costExpr(opts, teams, "%s")
	// The pooling rules' samples summed over the range, times their
	// interval, are GPU-hours: no subquery needed.
	costInRange := fmt.Sprintf("%s * %g / 3600", costExpr(opts, teams, "sum_over_time(%s[$__range])"), rules.PoolingInterval.Seconds())
	b := newDashboard("gpuwatch-team", "gpuwatch / Team and job",
		"GPU pooling between teams over time and its cost; GPUs allocated and used per team and job, and their efficiency over time.", false)
	for _, v := range priceVariables(opts) {
		b = b.WithVariable(v)
	}
	return finish(b.
		WithRow(row("Pooling and cost")).
		WithPanel(timeSeries("GPUs allocated by team", "GPUs each team holds over time (recording rule "+rules.AllocatedGPUs.Record+").", "short", 12,
			query(byTeam(rules.AllocatedGPUs), "{{team}}"))).
		WithPanel(timeSeries("GPUs used, idle and wasted by team",
			fmt.Sprintf("Held GPUs busier than %d%%, held GPUs at 0%% for 10 minutes, and the GPUs the analyzer counts as wasted (rate of its wasted GPU-seconds).", rules.BusyUtil), "short", 12,
			query(byTeam(rules.UsedGPUs), "{{team}} used"),
			// A team with no idle GPU shows 0, not a gap.
			query(fmt.Sprintf("%s or 0 * %s", byTeam(rules.IdleGPUs), byTeam(rules.AllocatedGPUs)), "{{team}} idle"),
			query(fmt.Sprintf("sum by (%s) (rate(%s[$__rate_interval]))", c.LabelTeam, sel(c.AnalyzerWastedGPUSeconds, teams)), "{{team}} wasted"))).
		WithPanel(timeSeries("Fleet capacity and unallocated GPUs", "Every GPU publishing telemetry, and those no job holds: the capacity left for the pool.", "short", 12,
			query(fmt.Sprintf("count(%s)", gpus(c.GPUTemp)), "capacity"),
			query(fmt.Sprintf("count(%s unless on (%s, %s) %s) or vector(0)", gpus(c.GPUTemp), c.LabelHostname, c.LabelUUID, c.AllocationInfo.Name), "unallocated"))).
		WithPanel(timeSeries("Cost per hour by team", "GPUs held times the price per GPU-hour of their model (dashboard variables "+varPrice+"*), per hour.", "short", 12,
			query(cost, "{{team}}"))).
		WithPanel(tableOf("Cost in range by team", "What each team's held GPUs cost over the dashboard's time range, at the prices of the dashboard variables.", 24, []string{"Cost"},
			instant(costInRange))).
		WithRow(row("Team")).
		WithPanel(singleStat("GPUs held", "GPUs held by the selected teams and jobs.", "short",
			query(fmt.Sprintf("count(%s) or vector(0)", holders()), "{{hostname}}"))).
		WithPanel(singleStat("GPUs in use", "Held GPUs busier than 5%.", "short",
			query(fmt.Sprintf("count(%s and on (hostname, UUID, GPU_I_ID) %s) or vector(0)", holders(), busy), "{{hostname}}"))).
		WithPanel(singleStat("Mean utilization", "Mean utilization of the held GPUs.", "percent",
			query(fmt.Sprintf("avg(%s)", perHolder(sel(c.GPUUtil, hw))), "{{hostname}}"))).
		WithPanel(singleStat("Jobs", "Jobs holding GPUs.", "short",
			query(fmt.Sprintf("count(count by (job_id) (%s)) or vector(0)", holders()), "{{hostname}}"))).
		WithRow(row("Jobs")).
		WithPanel(timeSeries("Allocated versus used GPUs per job", "GPUs each job holds, and those of them busier than 5%.", "short", 12,
			query(fmt.Sprintf("count by (hostname, team, job_id) (%s)", holders()), jobLegend+" allocated"),
			query(fmt.Sprintf("count by (hostname, team, job_id) (%s and on (hostname, UUID, GPU_I_ID) %s)", holders(), busy), jobLegend+" in use"))).
		WithPanel(timeSeries("GPU utilization per job", "Mean utilization of each job's GPUs: its efficiency over time.", "percent", 12,
			query(fmt.Sprintf("avg by (hostname, team, job_id) (%s)", perHolder(sel(c.GPUUtil, hw))), jobLegend))).
		WithPanel(timeSeries("SM activity per job", fmt.Sprintf("Mean SM activity of each job's GPUs (%s; Hopper GPM or the simulator).", c.ProfSMActive.Name), "percentunit", 12,
			query(fmt.Sprintf("avg by (hostname, team, job_id) (%s)", perHolder(sel(c.ProfSMActive, hw))), jobLegend))).
		WithPanel(timeSeries("GPU memory per job", "Framebuffer memory used on each job's GPUs.", "mbytes", 12,
			query(fmt.Sprintf("sum by (hostname, team, job_id) (%s)", perHolder(sel(c.FBUsed, hw))), jobLegend))).
		WithPanel(timeSeries("Power per job", "Power drawn by each job's GPUs.", "watt", 12,
			query(fmt.Sprintf("sum by (hostname, team, job_id) (%s)", perHolder(sel(c.PowerUsage, hw))), jobLegend))).
		WithPanel(timeSeries("CPU per job", "CPU cores each job uses (cgroup CPU time rate): a busy CPU with an idle GPU is a CPU-only job.", "short", 12,
			query(fmt.Sprintf("sum by (hostname, job_id) (rate(%s[$__rate_interval]))", jobCPU), "{{hostname}} {{job_id}}"))).
		WithPanel(tableOf("Jobs", "Each job's GPUs held, GPUs in use and mean utilization now.", 24, []string{"GPUs held", "GPUs in use", "Mean utilization %"},
			instant(fmt.Sprintf("count by (hostname, team, job_id, user, kind) (%s)", holders())),
			instant(fmt.Sprintf("count by (hostname, team, job_id, user, kind) (%s and on (hostname, UUID, GPU_I_ID) %s) or (0 * count by (hostname, team, job_id, user, kind) (%s))", holders(), busy, holders())),
			instant(fmt.Sprintf("avg by (hostname, team, job_id, user, kind) (%s)", perHolder(sel(c.GPUUtil, hw)))))).
		Build())
}

// modelPrices are the per-model prices, longest model first so that the
// longest match wins as in the report.
func modelPrices(opts Options) []string {
	models := make([]string, 0, len(opts.Prices))
	for m := range opts.Prices {
		models = append(models, m)
	}
	sort.Slice(models, func(i, j int) bool {
		if len(models[i]) != len(models[j]) {
			return len(models[i]) > len(models[j])
		}
		return models[i] < models[j]
	})
	return models
}

// priceVariables are editable text boxes holding the prices.
func priceVariables(opts Options) []cog.Builder[dashboard.VariableModel] {
	text := func(name, label string, price float64) cog.Builder[dashboard.VariableModel] {
		v := strconv.FormatFloat(price, 'f', -1, 64)
		return dashboard.NewTextBoxVariableBuilder(name).Label(label).
			DefaultValue(dashboard.StringOrMap{String: cog.ToPtr(v)}).
			Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr(v)}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr(v)}})
	}
	out := []cog.Builder[dashboard.VariableModel]{text(varPrice, "Price per GPU-hour", opts.DefaultPrice)}
	for i, m := range modelPrices(opts) {
		out = append(out, text(fmt.Sprintf("%s_%d", varPrice, i+1), "Price per GPU-hour: "+m, opts.Prices[m]))
	}
	return out
}

// costExpr is each team's cost: its held GPUs of each model, through fn (a
// format with one %s for the selector), times that model's price; `or` keeps
// the first (longest) match of a model. With fn "%s" it is the cost per hour.
func costExpr(opts Options, teams, fn string) string {
	alloc := rules.AllocatedGPUs.Record
	expr := ""
	for i, m := range modelPrices(opts) {
		// A raw string, so the escapes of QuoteMeta reach the regexp.
		s := fmt.Sprintf("%s{%s, %s=~`.*%s.*`}", alloc, teams, c.LabelModelName, regexp.QuoteMeta(m))
		expr += fmt.Sprintf("(%s * $%s_%d) or ", fmt.Sprintf(fn, s), varPrice, i+1)
	}
	expr += fmt.Sprintf("(%s * $%s)", fmt.Sprintf(fn, fmt.Sprintf("%s{%s}", alloc, teams)), varPrice)
	return fmt.Sprintf("sum by (%s) (%s)", c.LabelTeam, expr)
}
