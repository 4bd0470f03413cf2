package engine

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Metrics publishes the open findings under the catalogue's
// gpuwatch_analyzer_* names that the dashboards and alert rules read. The
// agent feeds it every CycleResult (Observe); the daemon feeds it the
// findings of each escalation cycle (ObserveFindings). Register it on any
// registry.
type Metrics struct {
	mu      sync.Mutex
	started time.Time
	wasted  map[[3]string]float64 // hostname, pattern, team → GPU-hours (counter)
	// seen holds each open finding's wasted GPU-hours at the last cycle, so
	// that the counter grows by what was wasted since.
	seen      map[string]float64
	open      []finding.Finding
	lastCycle time.Time
	coverage  *Coverage
	// ledger accounts every cycle's intervals and findings since the first.
	ledger *accounting.Ledger
}

// settleAfter is how long an allocation without a new interval stays open
// in the published accounting (the engine's default Retain): a job that
// comes back within it is still the same allocation.
const settleAfter = 24 * time.Hour

// NewMetrics returns an empty publisher.
func NewMetrics() *Metrics {
	return &Metrics{wasted: map[[3]string]float64{}, seen: map[string]float64{}}
}

// Observe records one cycle's result.
func (m *Metrics) Observe(res CycleResult) {
	if res.To.IsZero() {
		return // nothing new was read
	}
	m.ObserveFindings(res.To, res.Findings)
	m.ObserveCoverage(res.Coverage)
	m.ObserveAccounting(res)
}

// ObserveAccounting adds a cycle's usage intervals and findings (all of
// them, as the store keeps them for the reports) to the accounting the
// publisher shows.
func (m *Metrics) ObserveAccounting(res CycleResult) {
	if res.To.IsZero() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ledger == nil {
		m.ledger = accounting.NewLedger(res.From, time.Unix(1<<40, 0))
	}
	for i := range res.Intervals {
		m.ledger.AddUsage(&res.Intervals[i])
	}
	for _, k := range res.Withdrawn {
		m.ledger.RemoveFinding(k)
	}
	for i := range res.Findings {
		f := res.Findings[i]
		m.ledger.AddFinding(&f)
	}
	m.ledger.Settle(res.To.Add(-settleAfter))
}

// Accounting is what the publisher's cycles accounted so far.
func (m *Metrics) Accounting() accounting.Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ledger == nil {
		return accounting.Totals{}
	}
	return m.ledger.Close().Totals
}

// LastCoverage returns what the last cycle saw, if a cycle read anything.
func (m *Metrics) LastCoverage() (Coverage, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.coverage == nil {
		return Coverage{}, false
	}
	return *m.coverage, true
}

// ObserveCoverage records what the last cycle saw.
func (m *Metrics) ObserveCoverage(c Coverage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.coverage = &c
}

// ObserveFindings records the findings open at now. The wasted counter grows
// by what each finding added since the previous cycle, so a finding seen in
// many cycles is counted once. A finding already open (with a known start
// before it) when the publisher first observed is a baseline: after a
// restart its past waste is not counted a second time.
func (m *Metrics) ObserveFindings(now time.Time, fs []finding.Finding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.IsZero() {
		m.started = now
	}
	next := make(map[string]float64, len(fs))
	for i := range fs {
		f := &fs[i]
		k := f.Key()
		series := [3]string{f.Hostname, string(f.Pattern), f.Team}
		prev, ok := m.seen[k]
		switch {
		case ok && f.WastedGPUHours > prev:
			m.wasted[series] += f.WastedGPUHours - prev
		case !ok && (f.Start.IsZero() || !f.Start.Before(m.started)):
			m.wasted[series] += f.WastedGPUHours
		default:
			m.wasted[series] += 0 // the series exists from the first sighting
		}
		if ok && f.WastedGPUHours < prev {
			// A new episode of the same key: its waste counts from here.
			next[k] = f.WastedGPUHours
			continue
		}
		next[k] = max(prev, f.WastedGPUHours)
	}
	m.seen = next
	m.open = fs
	m.lastCycle = now
}

var (
	descWasted   = desc(schema.AnalyzerWastedGPUSeconds)
	descFindings = desc(schema.AnalyzerFindings)
	descJob      = desc(schema.AnalyzerJobWastedGPUSeconds)
	descLast     = desc(schema.AnalyzerLastCycle)
	descGPUs     = desc(schema.AnalyzerGPUsSeen)
	descAllocs   = desc(schema.AnalyzerAllocationsSeen)
	descCoverage = desc(schema.AnalyzerCoverage)
	descAccount  = desc(schema.AnalyzerAccountedGPUSeconds)
	descThrottle = desc(schema.AnalyzerThrottledGPUSeconds)
	descFaults   = desc(schema.AnalyzerGPUFaults)
)

func desc(c *schema.Metric) *prometheus.Desc {
	return prometheus.NewDesc(c.Name, c.Help, c.Labels, nil)
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- descWasted
	ch <- descFindings
	ch <- descJob
	ch <- descLast
	ch <- descGPUs
	ch <- descAllocs
	ch <- descCoverage
	ch <- descAccount
	ch <- descThrottle
	ch <- descFaults
}

// Collect implements prometheus.Collector. Waste is published in
// GPU-seconds (base units); findings keep GPU-hours.
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
	throttled := map[string]float64{}
	for _, f := range m.open {
		if f.Pattern == schema.Straggler || f.Pattern == schema.Throttled {
			throttled[f.Hostname] += f.Evidence["throttled_gpu_hours"]
		}
	}
	for h, v := range throttled {
		ch <- prometheus.MustNewConstMetric(descThrottle, prometheus.GaugeValue, v*3600, h)
	}
	for h, n := range gpuFaults(m.open) {
		ch <- prometheus.MustNewConstMetric(descFaults, prometheus.GaugeValue, float64(n), h)
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
	if m.ledger != nil {
		t := m.ledger.Close().Totals
		for _, v := range []struct {
			measure string
			hours   float64
		}{{schema.MeasureAllocated, t.Allocated}, {schema.MeasureUsed, t.Used}, {schema.MeasureWasted, t.Wasted},
			{schema.MeasureOverLimit, t.OverLimit}, {schema.MeasureDegraded, t.Degraded}, {schema.MeasureOrphan, t.Orphan}} {
			ch <- prometheus.MustNewConstMetric(descAccount, prometheus.GaugeValue, v.hours*3600, v.measure)
		}
	}
	if c := m.coverage; c != nil {
		ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(c.GPUs))
		ch <- prometheus.MustNewConstMetric(descAllocs, prometheus.GaugeValue, float64(c.Allocations))
		ch <- prometheus.MustNewConstMetric(descCoverage, prometheus.GaugeValue, c.Ratio)
	}
}

// gpuFaults counts the faults of the open gpu_fault findings by node, a
// shared GPU's once (health.GroupFaults) however many holders it has.
func gpuFaults(open []finding.Finding) map[string]int {
	byHost := map[string][]*finding.Finding{}
	for i := range open {
		if f := &open[i]; f.Pattern == schema.GPUFault {
			byHost[f.Hostname] = append(byHost[f.Hostname], f)
		}
	}
	out := make(map[string]int, len(byHost))
	for h, fs := range byHost {
		out[h] = health.CountFaults(fs)
	}
	return out
}
