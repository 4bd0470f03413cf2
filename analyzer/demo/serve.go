package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	analyzerweb "github.com/gpuwatch/gpuwatch/analyzer/web"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/server"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// LiveInterval is how often the live simulator is collected.
const LiveInterval = 10 * time.Second

// Handler starts the live exporter (the scenario's simulator on the wall
// clock, one collector per node, running until ctx ends) and returns the
// demo's HTTP handler:
//
//	/metrics               every node's GPU series in one exposition
//	/nodes/<host>/metrics  one node's exporter, as gpuwatch exporter serves it
//	/                      the analyzer's web page over the demo's store
//
// Call it after Simulate.
func (d *Demo) Handler(ctx context.Context, version string) (http.Handler, error) {
	if d.result == nil {
		return nil, errors.New("the web handler needs a finished simulation")
	}
	mux := http.NewServeMux()
	var cols []*collector.Collector
	for _, n := range d.sc.Nodes {
		src, err := sim.New(d.sc, sim.Options{Seed: d.o.Seed, Clock: source.SystemClock{}, Node: n.Hostname, Origin: d.o.Origin})
		if err != nil {
			return nil, fmt.Errorf("live simulator: %w", err)
		}
		col, err := collector.New(collector.Options{Source: src, Interval: LiveInterval, Logger: d.o.Logger.With("node", n.Hostname)})
		if err != nil {
			return nil, fmt.Errorf("live collector %s: %w", n.Hostname, err)
		}
		if _, err := col.CollectOnce(ctx); err != nil {
			d.o.Logger.Warn("first live collection failed", "node", n.Hostname, "err", err)
		}
		go col.Run(ctx)
		cols = append(cols, col)
		mux.Handle("/nodes/"+n.Hostname+"/metrics", server.MetricsHandler(col))
	}
	mux.Handle("/metrics", fleetMetrics(cols, d.o.Logger))

	cfg, err := d.reportConfig(ctx, d.result.Origin, d.result.End)
	if err != nil {
		return nil, err
	}
	rd, err := report.NewRenderer()
	if err != nil {
		return nil, fmt.Errorf("web page reports: %w", err)
	}
	end := d.result.End
	// The page's clock is the end of the simulation, so its current
	// findings are the simulated span's. Its "latest report" is the last
	// complete week before its clock: the week the simulation started in.
	clock := func() time.Time { return end }
	weekAfter := report.WeekOf(d.result.Origin, cfg.Location()).End
	reportClock := func() time.Time { return weekAfter }
	page := analyzerweb.Options{
		Findings:   analyzerweb.StoreFindings{Store: d.st, Window: end.Sub(d.result.Origin) + time.Minute, Now: clock},
		Audit:      analyzerweb.AuditLog{Log: d.log},
		Reports:    analyzerweb.BuiltReports{Builder: d.builder(cfg, end), Renderer: rd, Now: reportClock},
		Accounting: analyzerweb.BuiltReports{Builder: d.builder(cfg, end), Renderer: rd, Now: reportClock},
		Planner:    plannedSpan{d.result.Plan, d.result.PlanErr},
		Now:        clock,
		Logger:     d.o.Logger,
		Title:      "gpuwatch demo " + version,
		Coverage:   d.seen,
	}
	mux.Handle("/", analyzerweb.Handler(page))
	return mux, nil
}

// fleetMetrics serves the latest collection of every node as one
// exposition, so that one scrape sees the whole simulated fleet.
func fleetMetrics(cols []*collector.Collector, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		byName := map[string]*dto.MetricFamily{}
		seen := map[string]bool{}
		for _, c := range cols {
			e := c.Latest()
			if e == nil {
				continue
			}
			for _, f := range e.Families {
				m := byName[f.GetName()]
				if m == nil {
					m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
					byName[f.GetName()] = m
				}
				for _, s := range f.Metric {
					// Series without a hostname label (none today) would
					// repeat across nodes; the first one is kept.
					if id := f.GetName() + signature(s); !seen[id] {
						seen[id] = true
						m.Metric = append(m.Metric, s)
					}
				}
			}
		}
		if len(byName) == 0 {
			http.Error(w, "no collection yet", http.StatusServiceUnavailable)
			return
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", server.ContentType)
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, n := range names {
			if err := enc.Encode(byName[n]); err != nil {
				logger.Warn("write fleet metrics", "err", err)
				return
			}
		}
	})
}

func signature(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.Label {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}
