package schema

// Metrics of the analyzer's reclamation loop. The per-action counter,
// AnalyzerActions (gpuwatch_analyzer_actions_total{hostname,action,result}),
// is defined with the dashboards' analyzer metrics; the escalation publishes
// it with result one of done, failed, skipped, dry_run, rate_limited.
var (
	AnalyzerEscalationCycles = def(Metric{Name: "gpuwatch_analyzer_escalation_cycles_total", Type: Counter, Origin: OriginAnalyzer,
		Labels: []string{LabelResult},
		Help:   "Escalation cycles by result (ok, error)."})
	AnalyzerLastEscalation = def(Metric{Name: "gpuwatch_analyzer_last_escalation_timestamp_seconds", Type: Gauge, Unit: "seconds", Origin: OriginAnalyzer,
		Help: "Unix time of the last successful escalation cycle."})
)
