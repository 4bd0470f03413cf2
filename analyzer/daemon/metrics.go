package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
)

// Metrics are the daemon's own series.
type Metrics struct {
	Actions       *prometheus.CounterVec
	Cycles        *prometheus.CounterVec
	LastEscalated prometheus.Gauge
}

// NewMetrics registers the daemon's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Actions:       catalogue.AnalyzerActions.CounterVec(),
		Cycles:        catalogue.AnalyzerEscalationCycles.CounterVec(),
		LastEscalated: catalogue.AnalyzerLastEscalation.Gauge(),
	}
	reg.MustRegister(m.Actions, m.Cycles, m.LastEscalated)
	return m
}
