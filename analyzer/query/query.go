// Package query is the analyzer's one way to read telemetry: PromQL instant
// and range queries returning Prometheus model values. Two implementations
// answer it with the same queries: promapi (the Prometheus HTTP API, which
// Prometheus, Thanos, Mimir and VictoriaMetrics all speak) and embedded (a
// local TSDB with the PromQL engine, fed by the exporter in the same process).
package query

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/model"
)

// Range is the time range and resolution of a range query.
type Range struct {
	Start, End time.Time
	Step       time.Duration
}

// Querier runs PromQL. Instant queries return a model.Vector (or a scalar),
// range queries a model.Matrix. Errors name the query and the backend.
type Querier interface {
	Query(ctx context.Context, expr string, ts time.Time) (model.Value, error)
	QueryRange(ctx context.Context, expr string, r Range) (model.Value, error)
}

// SeriesLister is what a Querier may also answer: the label sets of the
// series that match a selector and have samples in [start, end], from the
// index alone (no sample is read). Both implementations have it.
type SeriesLister interface {
	Series(ctx context.Context, selector string, start, end time.Time) ([]model.LabelSet, error)
}

// SampleReader is what a Querier may also answer: the samples stored of
// every series of one metric with timestamps in [start, end], as stored
// (no PromQL evaluated, staleness markers dropped), handed to each series
// by series. A backend that cannot read them so returns an error that is
// errors.ErrUnsupported before handing any series on; Stored calls then
// ask the query API instead.
type SampleReader interface {
	ReadSamples(ctx context.Context, metric string, start, end time.Time, each func(model.Metric, []model.SamplePair) error) error
}

// Streamer is what a Querier may also answer: a query's answer handed on
// a part at a time as it is decoded (a series of a matrix, each a
// model.Matrix of one series; a sample of a vector, each a model.Vector of
// one), so that an answer is never held whole. A backend that cannot
// returns an error that is errors.ErrUnsupported before handing any part
// on.
type Streamer interface {
	QueryStream(ctx context.Context, expr string, ts time.Time, each func(model.Value) error) error
	QueryRangeStream(ctx context.Context, expr string, r Range, each func(model.Value) error) error
}

// Counting wraps a Querier and counts the queries it passes on, so tests and
// benchmarks can hold the number of queries per cycle to a bound. It is safe
// for concurrent use: features.Fetch issues its queries in parallel.
type Counting struct {
	Q Querier
	n atomic.Int64
}

// Query implements Querier.
func (c *Counting) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	c.n.Add(1)
	return c.Q.Query(ctx, expr, ts)
}

// QueryRange implements Querier.
func (c *Counting) QueryRange(ctx context.Context, expr string, r Range) (model.Value, error) {
	c.n.Add(1)
	return c.Q.QueryRange(ctx, expr, r)
}

// Series implements SeriesLister when the wrapped Querier does, and counts
// the call as a query.
func (c *Counting) Series(ctx context.Context, selector string, start, end time.Time) ([]model.LabelSet, error) {
	sl, ok := c.Q.(SeriesLister)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	c.n.Add(1)
	return sl.Series(ctx, selector, start, end)
}

// ReadSamples implements SampleReader when the wrapped Querier does, and
// counts the call as a query.
func (c *Counting) ReadSamples(ctx context.Context, metric string, start, end time.Time, each func(model.Metric, []model.SamplePair) error) error {
	sr, ok := c.Q.(SampleReader)
	if !ok {
		return errors.ErrUnsupported
	}
	c.n.Add(1)
	return sr.ReadSamples(ctx, metric, start, end, each)
}

// QueryStream implements Streamer when the wrapped Querier does, and
// counts the call as a query.
func (c *Counting) QueryStream(ctx context.Context, expr string, ts time.Time, each func(model.Value) error) error {
	st, ok := c.Q.(Streamer)
	if !ok {
		return errors.ErrUnsupported
	}
	c.n.Add(1)
	return st.QueryStream(ctx, expr, ts, each)
}

// QueryRangeStream implements Streamer when the wrapped Querier does, and
// counts the call as a query.
func (c *Counting) QueryRangeStream(ctx context.Context, expr string, r Range, each func(model.Value) error) error {
	st, ok := c.Q.(Streamer)
	if !ok {
		return errors.ErrUnsupported
	}
	c.n.Add(1)
	return st.QueryRangeStream(ctx, expr, r, each)
}

// Count returns the number of queries so far; queries may run side by side.
func (c *Counting) Count() int64 { return c.n.Load() }
