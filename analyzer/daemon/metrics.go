package daemon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Metrics are the daemon's own series, its actions and cycles, plus the
// findings the dashboards and alert rules read (engine.Metrics, the one
// publisher of schema.Analyzer* findings series, shared with the agent).
type Metrics struct {
	Actions       *prometheus.CounterVec
	Cycles        *prometheus.CounterVec
	LastEscalated prometheus.Gauge
	Found         *engine.Metrics
}

// NewMetrics registers the daemon's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Actions:       schema.AnalyzerActions.CounterVec(),
		Cycles:        schema.AnalyzerEscalationCycles.CounterVec(),
		LastEscalated: schema.AnalyzerLastEscalation.Gauge(),
		Found:         engine.NewMetrics(),
	}
	reg.MustRegister(m.Actions, m.Cycles, m.LastEscalated, m.Found)
	return m
}

// ObserveFindings publishes a detection cycle's open findings.
func (m *Metrics) ObserveFindings(now time.Time, fs []finding.Finding) {
	m.Found.ObserveFindings(now, fs)
}
