package catalogue

// Analyzer metrics the dashboards and alert rules read. They are defined here
// by the dashboards work so that no panel or rule spells a name of its own;
// the analyzer publishes them (OriginAnalyzer). LabelSeverity is the finding
// severity (info, warning, critical).
const LabelSeverity = "severity"

var (
	AnalyzerWastedGPUHours = def(Metric{Name: "gpuwatch_analyzer_wasted_gpu_hours_total", Type: Counter, Unit: "hours", Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelPattern, LabelTeam},
		Help:   "GPU-hours classified as wasted by the analyzer, by node, waste pattern and team."})
	AnalyzerFindings = def(Metric{Name: "gpuwatch_analyzer_findings", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelPattern, LabelSeverity, LabelTeam},
		Help:   "Open findings after the last analyzer cycle, by node, pattern, severity and team."})
	AnalyzerJobWastedGPUHours = def(Metric{Name: "gpuwatch_analyzer_job_wasted_gpu_hours", Type: Gauge, Unit: "hours", Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelJob, LabelUser, LabelTeam, LabelPattern},
		Help:   "GPU-hours wasted so far by each job with an open finding."})
	AnalyzerActions = def(Metric{Name: "gpuwatch_analyzer_actions_total", Type: Counter, Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelAction, LabelResult},
		Help:   "Actions decided by the policy, by node, action (notify, warn, checkpoint, reclaim, kill) and result (dry_run, done, failed)."})
	AnalyzerLastCycle = def(Metric{Name: "gpuwatch_analyzer_last_cycle_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Help: "Unix time of the end of the last successful analyzer cycle."})
)
