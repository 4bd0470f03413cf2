package schema

// Analyzer metrics the dashboards and alert rules read. They are defined here
// by the dashboards work so that no panel or rule spells a name of its own;
// the analyzer publishes them (OriginAnalyzer). LabelSeverity is the finding
// severity (info, warning, critical).
const LabelSeverity = "severity"

// LabelMeasure names a figure of the GPU-hour accounting (analyzer/accounting).
const LabelMeasure = "measure"

// The measure values of AnalyzerAccountedGPUSeconds.
const (
	MeasureAllocated = "allocated"
	MeasureUsed      = "used"
	MeasureWasted    = "wasted"
	MeasureOverLimit = "over_limit"
	MeasureDegraded  = "degraded"
	MeasureOrphan    = "orphan"
)

var (
	AnalyzerWastedGPUSeconds = def(Metric{Name: "gpuwatch_analyzer_wasted_gpu_seconds_total", Type: Counter, Unit: "seconds", Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelPattern, LabelTeam},
		Help:   "GPU time classified as wasted by the analyzer, in GPU-seconds (divide by 3600 for GPU-hours), by node, waste pattern and team."})
	AnalyzerFindings = def(Metric{Name: "gpuwatch_analyzer_findings", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelPattern, LabelSeverity, LabelTeam},
		Help:   "Open findings after the last analyzer cycle, by node, pattern, severity and team."})
	AnalyzerJobWastedGPUSeconds = def(Metric{Name: "gpuwatch_analyzer_job_wasted_gpu_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelJob, LabelUser, LabelTeam, LabelPattern},
		Help:   "GPU time wasted so far by each job with an open finding, in GPU-seconds."})
	AnalyzerActions = def(Metric{Name: "gpuwatch_analyzer_actions_total", Type: Counter, Origin: OriginAnalyzer,
		Labels: []string{LabelHostname, LabelAction, LabelResult},
		Help:   "Actions decided by the policy, by node, action (notify, warn, checkpoint, reclaim, kill) and result (dry_run, done, failed)."})
	AnalyzerLastCycle = def(Metric{Name: "gpuwatch_analyzer_last_cycle_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Help: "Unix time of the end of the last successful analyzer cycle."})
	AnalyzerGPUsSeen = def(Metric{Name: "gpuwatch_analyzer_gpus_seen", Type: Gauge, Origin: OriginAnalyzer,
		Help: "GPUs and MIG instances with data in the steps the last analyzer cycle read."})
	AnalyzerAllocationsSeen = def(Metric{Name: "gpuwatch_analyzer_allocations_seen", Type: Gauge, Origin: OriginAnalyzer,
		Help: "Allocations (host and job) on those GPUs in the steps the last analyzer cycle read."})
	AnalyzerAccountedGPUSeconds = def(Metric{Name: "gpuwatch_analyzer_accounted_gpu_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Labels: []string{LabelMeasure},
		Help:   "GPU time the analyzer's cycles accounted since it started, in GPU-seconds, by measure, as the reports count it: allocated; used (active, less waste); wasted (at most allocated; spin-wait included); over_limit (past a run-time limit, not waste); degraded (slowed by throttled or faulty GPUs, not waste); orphan (held by processes of no live job, outside allocated). A later cycle may move used time to wasted."})
	AnalyzerThrottledGPUSeconds = def(Metric{Name: "gpuwatch_analyzer_throttled_gpu_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Labels: []string{LabelHostname},
		Help:   "Busy GPU time spent under a throttling clock-event reason by the GPUs of the open straggler and throttled findings, in GPU-seconds, by node: the fleet-health ranking (docs/health.md)."})
	AnalyzerGPUFaults = def(Metric{Name: "gpuwatch_analyzer_gpu_faults", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelHostname},
		Help:   "Faults of the GPUs of the open gpu_fault findings after the last analyzer cycle, by node: a shared GPU's fault (time-slicing, MPS, vGPU, MIG instances) counts once however many holders have a finding of it (docs/health.md)."})
	AnalyzerCoverage = def(Metric{Name: "gpuwatch_analyzer_coverage_ratio", Type: Gauge, Unit: "ratio", Origin: OriginAnalyzer,
		Help: "Share of GPU-steps the last analyzer cycle read with enough samples to judge; the rest is unknown, never idle."})
)
