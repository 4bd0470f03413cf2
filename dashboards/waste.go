package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	c "github.com/gpuwatch/gpuwatch/schema"
)

// Waste shows what the analyzer found and did: wasted GPU-hours by pattern
// and team over time, the open findings, the actions taken and the jobs that
// waste most, beside the exporter's own plainest waste signal (allocated GPUs
// that stay idle).
func Waste() (dashboard.Dashboard, error) {
	team := fmt.Sprintf(`%s=~"$%s", %s=~"$%s"`, c.LabelHostname, varHostname, c.LabelTeam, varTeam)
	host := fmt.Sprintf(`%s=~"$%s"`, c.LabelHostname, varHostname)
	wasted := sel(c.AnalyzerWastedGPUSeconds, team)
	idle := fmt.Sprintf("(max_over_time(%s[10m]) == 0)", sel(c.GPUUtil, hw))
	return finish(newDashboard("gpuwatch-waste", "gpuwatch / Waste and reclamation",
		"GPU-hours wasted by pattern and team, open findings, actions taken and the most wasteful jobs.", false).
		WithRow(row("Summary")).
		WithPanel(singleStat("Wasted GPU-hours in range", "GPU-hours the analyzer classified as wasted over the dashboard's time range.", "h",
			query(fmt.Sprintf("sum(increase(%s[$__range])) / 3600", wasted), "{{hostname}}"))).
		WithPanel(singleStat("Open findings", "Findings open after the analyzer's last cycle.", "short",
			query(fmt.Sprintf("sum(%s) or vector(0)", sel(c.AnalyzerFindings, team)), "{{hostname}}"))).
		WithPanel(singleStat("Actions in range", "Actions the policy decided over the dashboard's time range (dry-run included).", "short",
			query(fmt.Sprintf("sum(increase(%s[$__range])) or vector(0)", sel(c.AnalyzerActions, host)), "{{hostname}}"))).
		WithPanel(singleStat("Idle allocated GPUs", "GPUs held by a job that stayed at 0% utilization for 10 minutes (exporter data, no analyzer needed).", "short",
			query(fmt.Sprintf("count(%s and on (hostname, UUID, GPU_I_ID) %s) or vector(0)", holders(), idle), "{{hostname}}"))).
		WithPanel(singleStat("Analyzer last cycle", "Time since the analyzer last finished a detection or escalation cycle.", "s",
			query(fmt.Sprintf("time() - max(%s or %s)", sel(c.AnalyzerLastCycle, ""), sel(c.AnalyzerLastEscalation, "")), ""))).
		WithRow(row("Wasted GPU-hours")).
		WithPanel(timeSeries("Wasted GPU-hours by pattern", "GPU-hours classified as wasted per interval, by waste pattern and node.", "h", 12,
			query(fmt.Sprintf("sum by (hostname, pattern) (increase(%s[$__rate_interval])) / 3600", wasted), "{{hostname}} {{pattern}}"))).
		WithPanel(timeSeries("Wasted GPU-hours by team", "GPU-hours classified as wasted per interval, by team and node.", "h", 12,
			query(fmt.Sprintf("sum by (hostname, team) (increase(%s[$__rate_interval])) / 3600", wasted), "{{hostname}} {{team}}"))).
		WithPanel(timeSeries("Idle allocated GPUs by team", "GPUs held by a job and idle for 10 minutes, by team and node.", "short", 12,
			query(fmt.Sprintf("count by (hostname, team) (%s and on (hostname, UUID, GPU_I_ID) %s) or 0 * count by (hostname, team) (%s)", holders(), idle, holders()), "{{hostname}} {{team}}"))).
		WithPanel(timeSeries("Actions taken", "Policy actions per interval, by action and result.", "short", 12,
			query(fmt.Sprintf("sum by (hostname, action, result) (increase(%s[$__rate_interval]))", sel(c.AnalyzerActions, host)), "{{hostname}} {{action}} {{result}}"))).
		WithRow(row("Fleet health")).
		WithPanel(tableOf("Nodes by throttled GPU-hours", "Busy GPU-hours spent throttled (power cap, thermal, hardware slowdown) by the GPUs of open straggler and throttled findings, per node: the nodes that keep slowing jobs down (docs/health.md).", 12, []string{"Throttled GPU-hours"},
			instant(fmt.Sprintf("topk(10, sum by (hostname) (%s)) / 3600", sel(c.AnalyzerThrottledGPUSeconds, host))))).
		WithPanel(tableOf("GPU faults and stragglers by node", "Open health findings per node: GPU faults (hardware XIDs, ECC, row remap; a shared GPU's fault once, however many jobs hold it), stragglers, throttled jobs and application XIDs (the job's own code, not the GPU).", 12, []string{"Findings"},
			instant(fmt.Sprintf(`sum by (hostname, pattern) (%s) or label_replace(sum by (hostname) (%s), "%s", "%s", "", "")`,
				sel(c.AnalyzerFindings, fmt.Sprintf(`%s, %s=~"%s|%s|%s"`, host, c.LabelPattern, c.Straggler, c.Throttled, c.AppXID)),
				sel(c.AnalyzerGPUFaults, host), c.LabelPattern, c.GPUFault)))).
		WithRow(row("Findings and jobs")).
		WithPanel(tableOf("Current findings", "Open findings by node, team, pattern and severity.", 12, []string{"Findings"},
			instant(fmt.Sprintf("sum by (hostname, team, pattern, severity) (%s)", sel(c.AnalyzerFindings, team))))).
		WithPanel(tableOf("Top jobs by wasted GPU-hours", "The ten jobs with the most GPU-hours wasted so far.", 12, []string{"Wasted GPU-hours"},
			instant(fmt.Sprintf("topk(10, %s) / 3600", sel(c.AnalyzerJobWastedGPUSeconds, team))))).
		Build())
}
