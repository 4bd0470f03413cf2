package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	c "github.com/gpuwatch/gpuwatch/exporter/catalogue"
)

// Team shows, per team and job, the GPUs held against the GPUs used, and how
// efficiently they are used over time.
func Team() (dashboard.Dashboard, error) {
	jobLegend := "{{hostname}} {{team}} {{job_id}}"
	busy := fmt.Sprintf("(%s > 5)", sel(c.GPUUtil, hw))
	jobCPU := sel(c.JobCPUSeconds, fmt.Sprintf(`%s=~"$%s", %s=~"$%s"`, c.LabelHostname, varHostname, c.LabelJob, varJob))
	return numbered(newDashboard("gpuwatch-team", "gpuwatch / Team and job",
		"GPUs allocated and used per team and job, and their efficiency over time.", false).
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
