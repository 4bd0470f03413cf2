// Package agent is gpuwatch's single-node mode: the exporter, an embedded
// telemetry store fed by it, and analyzer cycles over that store, in one
// process. The exporter still serves /metrics, so a fleet Prometheus can
// scrape an agent like any exporter.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// Options of the agent.
type Options struct {
	Exporter *cli.Config
	// TSDBDir is the embedded telemetry store's folder; StatePath the state
	// database (SQLite). Both are created when missing.
	TSDBDir, StatePath string
	// StoreInterval is the resolution kept in the TSDB (default 30s): the
	// exporter may collect every second for its scrapes, the analyzer needs
	// far less.
	StoreInterval time.Duration
	// Retention of raw telemetry (default 15 days).
	Retention time.Duration
	Config    config.Config
	Logger    *slog.Logger
	Version   string
}

// Ingest is the collector hook: it appends one collection in every
// StoreInterval to the embedded TSDB.
type Ingest struct {
	app      *embedded.Appender
	interval time.Duration
	logger   *slog.Logger
	mu       sync.Mutex
	last     time.Time
}

// NewIngest returns the hook for db.
func NewIngest(db *embedded.DB, interval time.Duration, logger *slog.Logger) *Ingest {
	return &Ingest{app: db.Appender(), interval: interval, logger: logger}
}

// OnCollect implements collector.Options.OnCollect.
func (in *Ingest) OnCollect(snap *source.Snapshot, fams []*dto.MetricFamily) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.last.IsZero() && snap.Time.Sub(in.last) < in.interval {
		return
	}
	if err := in.app.AppendFamilies(context.Background(), snap.Time, fams); err != nil {
		in.logger.Warn("embedded store: append failed", "err", err)
		return
	}
	in.last = snap.Time
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.StoreInterval <= 0 {
		o.StoreInterval = 30 * time.Second
	}
	if o.Config.Step == 0 {
		o.Config = config.Default()
	}
	// Fail on bad exporter flags before touching the storage folder.
	if err := o.Exporter.Validate(); err != nil {
		return err
	}
	for _, dir := range []string{o.TSDBDir, filepath.Dir(o.StatePath)} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("agent storage %s: %w", dir, err)
		}
	}
	db, err := embedded.Open(o.TSDBDir, embedded.Options{Retention: o.Retention, Logger: o.Logger})
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := store.Open(o.StatePath)
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Querier: db, Store: st, Config: o.Config, Logger: o.Logger})
	if err != nil {
		return err
	}
	metrics := engine.NewMetrics()
	o.Logger.Info("gpuwatch agent starting", "tsdb", o.TSDBDir, "state", o.StatePath, "step", o.Config.Step)
	// The exporter is the one of `gpuwatch exporter`; the agent only adds
	// the store it feeds and the analyzer cycles that read it.
	return cli.Run(ctx, o.Exporter, o.Logger, o.Version, cli.Hooks{
		OnCollect:  NewIngest(db, o.StoreInterval, o.Logger).OnCollect,
		Collectors: []prometheus.Collector{metrics},
		Background: func(ctx context.Context) { Cycles(ctx, eng, metrics, source.SystemClock{}, o.Logger) },
	})
}

// Cycles runs an analyzer cycle after each step boundary until ctx ends,
// publishing each result through metrics.
func Cycles(ctx context.Context, eng *engine.Engine, metrics *engine.Metrics, clock source.Clock, logger *slog.Logger) {
	step := eng.Step()
	for {
		now := clock.Now()
		// A few seconds past the boundary, so the step's last samples are in.
		next := now.Truncate(step).Add(step + 5*time.Second)
		select {
		case <-ctx.Done():
			return
		case <-time.After(next.Sub(now)):
		}
		start := time.Now()
		res, err := eng.Cycle(ctx, clock.Now())
		switch {
		case errors.Is(err, context.Canceled):
			return
		case err != nil:
			logger.Error("analyzer cycle failed", "err", err)
			continue
		}
		metrics.Observe(res)
		logger.Info("analyzer cycle", "to", res.To, "steps", res.Steps, "queries", res.Queries,
			"allocations", res.Allocations, "unknown", len(res.Unknown), "findings", len(res.Findings),
			"duration", time.Since(start).Round(time.Millisecond))
		for _, f := range res.Findings {
			logger.Info("finding", "pattern", f.Pattern, "job", f.Job, "host", f.Hostname, "user", f.User,
				"wasted_gpu_hours", f.WastedGPUHours, "action", f.Action)
		}
	}
}
