// Package embedded is the analyzer's local telemetry store: a Prometheus TSDB
// on disk with the PromQL engine over it. The exporter in the same process
// appends each collection (Appender.AppendFamilies, wired to the collector's
// OnCollect hook), and the analyzer queries it through query.Querier exactly
// as it queries a remote Prometheus.
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// Options tune the store and the engine. Zero values take the defaults.
type Options struct {
	// Retention of raw samples (default 15 days: a week's analysis plus margin).
	Retention time.Duration
	// MaxSamples bounds the samples one query may load (default 200 million).
	MaxSamples int
	// Timeout bounds one query (default 2 minutes).
	Timeout time.Duration
	// LookbackDelta is how old a sample may be and still count as current
	// (default 5 minutes, as in Prometheus).
	LookbackDelta time.Duration
	// Logger receives the TSDB's and the engine's records, their INFO
	// lowered to DEBUG (see libraryLogger).
	Logger *slog.Logger
}

// DB is an embedded TSDB with a PromQL engine. It implements query.Querier.
type DB struct {
	db     *tsdb.DB
	engine *promql.Engine
}

var (
	_ query.Querier      = (*DB)(nil)
	_ query.SeriesLister = (*DB)(nil)
)

// Open opens (creating if needed) the TSDB in dir.
func Open(dir string, o Options) (*DB, error) {
	if o.Retention == 0 {
		o.Retention = 15 * 24 * time.Hour
	}
	if o.MaxSamples == 0 {
		o.MaxSamples = 200_000_000
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.LookbackDelta == 0 {
		o.LookbackDelta = 5 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	logger := libraryLogger(o.Logger)
	opts := tsdb.DefaultOptions()
	opts.RetentionDuration = o.Retention.Milliseconds()
	// Corpora and the demo append history older than "now"; allow the head to
	// take samples up to the retention back so a replayed week is accepted.
	opts.OutOfOrderTimeWindow = o.Retention.Milliseconds()
	db, err := tsdb.Open(dir, logger, nil, opts, nil)
	if err != nil {
		return nil, fmt.Errorf("open embedded tsdb %s: %w", dir, err)
	}
	eng := promql.NewEngine(promql.EngineOpts{
		Logger:               logger,
		MaxSamples:           o.MaxSamples,
		Timeout:              o.Timeout,
		LookbackDelta:        o.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
	return &DB{db: db, engine: eng}, nil
}

// Close closes the TSDB.
func (d *DB) Close() error { return d.db.Close() }

// TSDB exposes the underlying database (for compaction in tests and benchmarks).
func (d *DB) TSDB() *tsdb.DB { return d.db }

// Query runs an instant query at ts.
func (d *DB) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	q, err := d.engine.NewInstantQuery(ctx, d.db, nil, expr, ts)
	if err != nil {
		return nil, fmt.Errorf("embedded query %q: %w", expr, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("embedded query %q: %w", expr, res.Err)
	}
	return convert(res.Value)
}

// QueryRange runs a range query.
func (d *DB) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	q, err := d.engine.NewRangeQuery(ctx, d.db, nil, expr, r.Start, r.End, r.Step)
	if err != nil {
		return nil, fmt.Errorf("embedded range query %q: %w", expr, err)
	}
	defer q.Close()
	res := q.Exec(ctx)
	if res.Err != nil {
		return nil, fmt.Errorf("embedded range query %q: %w", expr, res.Err)
	}
	return convert(res.Value)
}

// Series lists the series matching selector with samples in [start, end],
// from the index.
func (d *DB) Series(ctx context.Context, selector string, start, end time.Time) ([]model.LabelSet, error) {
	ms, err := parser.NewParser(parser.Options{}).ParseMetricSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("embedded series %q: %w", selector, err)
	}
	q, err := d.db.Querier(start.UnixMilli(), end.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("embedded series %q: %w", selector, err)
	}
	defer q.Close()
	set := q.Select(ctx, false, &storage.SelectHints{Start: start.UnixMilli(), End: end.UnixMilli(), Func: "series"}, ms...)
	var out []model.LabelSet
	for set.Next() {
		out = append(out, model.LabelSet(metric(set.At().Labels())))
	}
	if err := set.Err(); err != nil {
		return nil, fmt.Errorf("embedded series %q: %w", selector, err)
	}
	return out, nil
}

func metric(ls labels.Labels) model.Metric {
	m := make(model.Metric, ls.Len())
	ls.Range(func(l labels.Label) { m[model.LabelName(l.Name)] = model.LabelValue(l.Value) })
	return m
}

// convert turns the engine's result into the model values the HTTP API
// client returns, so callers see one representation whatever the backend.
func convert(v any) (model.Value, error) {
	switch x := v.(type) {
	case promql.Vector:
		out := make(model.Vector, 0, len(x))
		for _, s := range x {
			if s.H != nil {
				continue // native histograms are not part of the GPU contract
			}
			out = append(out, &model.Sample{Metric: metric(s.Metric), Value: model.SampleValue(s.F), Timestamp: model.Time(s.T)})
		}
		return out, nil
	case promql.Matrix:
		out := make(model.Matrix, 0, len(x))
		for _, s := range x {
			ss := &model.SampleStream{Metric: metric(s.Metric), Values: make([]model.SamplePair, 0, len(s.Floats))}
			for _, p := range s.Floats {
				ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.Time(p.T), Value: model.SampleValue(p.F)})
			}
			out = append(out, ss)
		}
		return out, nil
	case promql.Scalar:
		return &model.Scalar{Value: model.SampleValue(x.V), Timestamp: model.Time(x.T)}, nil
	case promql.String:
		return &model.String{Value: x.V, Timestamp: model.Time(x.T)}, nil
	default:
		return nil, fmt.Errorf("embedded: unsupported result type %T", v)
	}
}

// Appender writes metric families into the DB. It is what the collector's
// OnCollect hook, the demo and the tests call.
type Appender struct{ db *DB }

// Appender returns an appender for the DB.
func (d *DB) Appender() *Appender { return &Appender{db: d} }

// AppendFamilies ingests families at ts (the collection time). Counters and
// gauges keep their value; untyped metrics are taken as gauges. A family
// with a name that PromQL cannot address is rejected as a whole.
func (a *Appender) AppendFamilies(ctx context.Context, ts time.Time, fams []*dto.MetricFamily) error {
	app := a.db.db.Appender(ctx)
	t := ts.UnixMilli()
	b := labels.NewScratchBuilder(16)
	n := 0
	for _, f := range fams {
		name := f.GetName()
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default:
				continue // summaries and histograms: not read by the analyzer
			}
			b.Reset()
			b.Add(model.MetricNameLabel, name)
			for _, lp := range m.GetLabel() {
				if lp.GetValue() == "" {
					continue // Prometheus drops empty labels on ingest; so do we
				}
				b.Add(lp.GetName(), lp.GetValue())
			}
			b.Sort()
			if _, err := app.Append(0, b.Labels(), t, v); err != nil {
				_ = app.Rollback()
				return fmt.Errorf("append %s at %s: %w", name, ts.Format(time.RFC3339), err)
			}
			n++
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit %d samples at %s: %w", n, ts.Format(time.RFC3339), err)
	}
	return nil
}

// Sample is one value to append directly (tests, corpora).
type Sample struct {
	Labels map[string]string // including __name__
	T      time.Time
	V      float64
}

// AppendSamples appends raw samples in one transaction. NaN values are
// written as Prometheus staleness markers are not: they are skipped, so a gap
// stays a gap.
func (a *Appender) AppendSamples(ctx context.Context, ss []Sample) error {
	app := a.db.db.Appender(ctx)
	for _, s := range ss {
		if math.IsNaN(s.V) {
			continue
		}
		if _, err := app.Append(0, labels.FromMap(s.Labels), s.T.UnixMilli(), s.V); err != nil {
			_ = app.Rollback()
			return fmt.Errorf("append %v: %w", s.Labels, err)
		}
	}
	if err := app.Commit(); err != nil {
		return fmt.Errorf("commit %d samples: %w", len(ss), err)
	}
	return nil
}
