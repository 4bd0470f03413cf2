package plan

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Metrics publishes the latest plan as the gpuwatch_planner_* gauges. It
// serves the plan it was last given; nothing is computed at scrape time.
type Metrics struct {
	mu sync.Mutex
	p  *Plan
}

// NewMetrics returns a collector with no plan yet (it then publishes nothing).
func NewMetrics() *Metrics { return &Metrics{} }

// Observe makes p the published plan.
func (m *Metrics) Observe(p *Plan) {
	m.mu.Lock()
	m.p = p
	m.mu.Unlock()
}

func desc(m *schema.Metric) *prometheus.Desc {
	return prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
}

var (
	descHeld         = desc(schema.PlannerGPUsHeld)
	descNeeded       = desc(schema.PlannerGPUsNeeded)
	descFreeable     = desc(schema.PlannerGPUsFreeable)
	descUnknown      = desc(schema.PlannerGPUsUnknown)
	descCoverage     = desc(schema.PlannerCoverage)
	descTeamHeld     = desc(schema.PlannerTeamGPUsHeld)
	descTeamNeeded   = desc(schema.PlannerTeamGPUsNeeded)
	descTeamFreeable = desc(schema.PlannerTeamGPUsFreeable)
	descForecast     = desc(schema.PlannerForecastPeakGPUs)
	descWindow       = desc(schema.PlannerWindowSeconds)
	descLast         = desc(schema.PlannerLastPlan)
)

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeld, descNeeded, descFreeable, descUnknown, descCoverage,
		descTeamHeld, descTeamNeeded, descTeamFreeable, descForecast, descWindow, descLast} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	p := m.p
	m.mu.Unlock()
	if p == nil {
		return
	}
	g := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, pl := range p.Pools {
		g(descHeld, float64(pl.Held), pl.Name)
		g(descNeeded, float64(pl.Needed), pl.Name)
		g(descFreeable, float64(pl.Freeable), pl.Name)
		g(descUnknown, float64(pl.Unknown), pl.Name)
		g(descCoverage, pl.Coverage, pl.Name)
		if pl.Forecast != nil {
			peak := 0.0
			for _, x := range pl.Forecast.Next {
				peak = max(peak, x)
			}
			g(descForecast, peak, pl.Name)
		}
	}
	for _, t := range p.Teams {
		g(descTeamHeld, float64(t.Held), t.Team)
		g(descTeamNeeded, float64(t.Needed), t.Team)
		g(descTeamFreeable, float64(t.Freeable), t.Team)
	}
	g(descWindow, p.To.Sub(p.From).Seconds())
	g(descLast, float64(p.To.Unix()))
}
