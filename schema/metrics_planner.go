package schema

// Capacity planner metrics: the plan of the last window, per node pool and
// per team. LabelPool names a node pool (GPU model, or model/node group).
const LabelPool = "pool"

var (
	PlannerGPUsHeld = def(Metric{Name: "gpuwatch_planner_gpus_held", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "GPUs of the pool that an allocation held at some time in the planner's window."})
	PlannerGPUsNeeded = def(Metric{Name: "gpuwatch_planner_gpus_needed", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "GPUs the pool's allocations need when packed into MIG slices or time-shared (p95 SM activity, or mean util where only util is published; GPUs of unknown demand included)."})
	PlannerGPUsFreeable = def(Metric{Name: "gpuwatch_planner_gpus_freeable", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "GPUs of the pool that could be freed: held minus needed, never counting GPUs whose demand is unknown."})
	PlannerGPUsUnknown = def(Metric{Name: "gpuwatch_planner_gpus_unknown", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "GPUs of the pool held by allocations whose demand the planner could not read; they are kept as needed."})
	PlannerCoverage = def(Metric{Name: "gpuwatch_planner_coverage_ratio", Type: Gauge, Unit: "ratio", Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "Share of the expected telemetry samples of the pool's GPUs that the planner's window holds."})
	PlannerTeamGPUsHeld = def(Metric{Name: "gpuwatch_planner_team_gpus_held", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelTeam},
		Help:   "GPUs the team's allocations held at some time in the planner's window."})
	PlannerTeamGPUsNeeded = def(Metric{Name: "gpuwatch_planner_team_gpus_needed", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelTeam},
		Help:   "GPUs the team's allocations need when packed on their own, per pool."})
	PlannerTeamGPUsFreeable = def(Metric{Name: "gpuwatch_planner_team_gpus_freeable", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelTeam},
		Help:   "GPUs the team could free: held minus needed, never counting GPUs whose demand is unknown."})
	PlannerForecastPeakGPUs = def(Metric{Name: "gpuwatch_planner_forecast_peak_gpus", Type: Gauge, Origin: OriginAnalyzer,
		Labels: []string{LabelPool},
		Help:   "Highest hourly compute demand, in GPU-equivalents of SM activity (or of util where the data has no profiling fields), the forecast expects in the week after the planner's window."})
	PlannerWindowSeconds = def(Metric{Name: "gpuwatch_planner_window_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Help: "Length of the planner's window."})
	PlannerLastPlan = def(Metric{Name: "gpuwatch_planner_last_plan_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Help: "Unix time of the end of the window of the last plan."})
)
