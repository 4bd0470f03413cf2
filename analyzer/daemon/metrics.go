package daemon

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
)

// Metrics are the daemon's own series: its actions and cycles, and the
// findings the dashboards and alert rules read (catalogue.Analyzer*).
type Metrics struct {
	Actions       *prometheus.CounterVec
	Cycles        *prometheus.CounterVec
	LastEscalated prometheus.Gauge
	LastCycle     prometheus.Gauge
	Findings      *prometheus.GaugeVec
	JobWasted     *prometheus.GaugeVec
	Wasted        *prometheus.CounterVec

	mu      sync.Mutex
	started time.Time
	// seen holds each open finding's wasted GPU-hours at the last cycle, so
	// that the counter grows by what was wasted since.
	seen map[string]float64
}

// NewMetrics registers the daemon's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Actions:       catalogue.AnalyzerActions.CounterVec(),
		Cycles:        catalogue.AnalyzerEscalationCycles.CounterVec(),
		LastEscalated: catalogue.AnalyzerLastEscalation.Gauge(),
		LastCycle:     catalogue.AnalyzerLastCycle.Gauge(),
		Findings:      catalogue.AnalyzerFindings.GaugeVec(),
		JobWasted:     catalogue.AnalyzerJobWastedGPUSeconds.GaugeVec(),
		Wasted:        catalogue.AnalyzerWastedGPUSeconds.CounterVec(),
		seen:          map[string]float64{},
	}
	reg.MustRegister(m.Actions, m.Cycles, m.LastEscalated, m.LastCycle, m.Findings, m.JobWasted, m.Wasted)
	return m
}

// ObserveFindings publishes a detection cycle's open findings.
func (m *Metrics) ObserveFindings(now time.Time, fs []finding.Finding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.IsZero() {
		m.started = now
	}
	m.LastCycle.Set(float64(now.UnixNano()) / 1e9)
	m.Findings.Reset()
	m.JobWasted.Reset()
	next := make(map[string]float64, len(fs))
	for i := range fs {
		f := &fs[i]
		k := f.Key()
		m.Findings.WithLabelValues(f.Hostname, string(f.Pattern), string(f.Severity), f.Team).Inc()
		m.JobWasted.WithLabelValues(f.Hostname, f.Job, f.User, f.Team, string(f.Pattern)).Set(f.WastedGPUHours * 3600)
		prev, ok := m.seen[k]
		switch {
		case ok && f.WastedGPUHours > prev:
			m.Wasted.WithLabelValues(f.Hostname, string(f.Pattern), f.Team).Add((f.WastedGPUHours - prev) * 3600)
		case !ok && !f.Start.Before(m.started):
			// A finding that began while we were watching counts in full;
			// one open when the daemon started is a baseline, so that a
			// restart does not count its waste twice.
			m.Wasted.WithLabelValues(f.Hostname, string(f.Pattern), f.Team).Add(f.WastedGPUHours * 3600)
		default:
			// Touch the series so that it exists from the first sighting.
			m.Wasted.WithLabelValues(f.Hostname, string(f.Pattern), f.Team)
		}
		if ok && f.WastedGPUHours < prev {
			// A new episode of the same key: its waste counts from here.
			next[k] = f.WastedGPUHours
			continue
		}
		next[k] = max(prev, f.WastedGPUHours)
	}
	m.seen = next
}
