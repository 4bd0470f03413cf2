package engine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
)

// Metrics publishes what the cycles found, under the catalogue's
// gpuwatch_analyzer_* names that the dashboards and alert rules read. Feed
// it every CycleResult with Observe; register it on any registry.
type Metrics struct {
	mu        sync.Mutex
	wasted    map[[3]string]float64 // hostname, pattern, team → GPU-hours (counter)
	lastWaste map[string]float64    // finding key → wasted at the last cycle
	open      []finding.Finding
	lastCycle time.Time
}

// NewMetrics returns an empty publisher.
func NewMetrics() *Metrics {
	return &Metrics{wasted: map[[3]string]float64{}, lastWaste: map[string]float64{}}
}

// Observe records one cycle's result. The wasted-hours counter grows by
// what each finding added since the previous cycle, so a finding seen in
// many cycles is counted once.
func (m *Metrics) Observe(res CycleResult) {
	if res.To.IsZero() {
		return // nothing new was read
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]float64{}
	for _, f := range res.Findings {
		k := f.Key()
		if d := f.WastedGPUHours - m.lastWaste[k]; d > 0 {
			m.wasted[[3]string{f.Hostname, string(f.Pattern), f.Team}] += d
		}
		seen[k] = max(f.WastedGPUHours, m.lastWaste[k])
	}
	m.lastWaste = seen
	m.open = res.Findings
	m.lastCycle = res.To
}

var (
	descWasted   = desc(catalogue.AnalyzerWastedGPUSeconds)
	descFindings = desc(catalogue.AnalyzerFindings)
	descJob      = desc(catalogue.AnalyzerJobWastedGPUSeconds)
	descLast     = desc(catalogue.AnalyzerLastCycle)
)

func desc(c *catalogue.Metric) *prometheus.Desc {
	return prometheus.NewDesc(c.Name, c.Help, c.Labels, nil)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWasted
	ch <- descFindings
	ch <- descJob
	ch <- descLast
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, v := range m.wasted {
		ch <- prometheus.MustNewConstMetric(descWasted, prometheus.CounterValue, v*3600, k[0], k[1], k[2])
	}
	counts := map[[4]string]float64{}
	jobs := map[[5]string]float64{}
	for _, f := range m.open {
		counts[[4]string{f.Hostname, string(f.Pattern), string(f.Severity), f.Team}]++
		jobs[[5]string{f.Hostname, f.Job, f.User, f.Team, string(f.Pattern)}] += f.WastedGPUHours
	}
	for k, v := range counts {
		ch <- prometheus.MustNewConstMetric(descFindings, prometheus.GaugeValue, v, k[0], k[1], k[2], k[3])
	}
	for k, v := range jobs {
		ch <- prometheus.MustNewConstMetric(descJob, prometheus.GaugeValue, v*3600, k[0], k[1], k[2], k[3], k[4])
	}
	if !m.lastCycle.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLast, prometheus.GaugeValue, float64(m.lastCycle.UnixMilli())/1000)
	}
}
