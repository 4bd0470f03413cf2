// Package collector runs collection in the background and keeps the latest
// exposition ready, so a scrape only copies bytes and never waits on the
// driver, the kubelet or anything else.
package collector

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Options configure a Collector.
type Options struct {
	Source      source.Source
	Attributors []source.Attributor
	// Interval between collections (--collect-interval).
	Interval time.Duration
	// Timeout bounds one collection; defaults to Interval.
	Timeout time.Duration
	// StaleAfter is how old the last good collection may be before /healthz
	// answers 503; defaults to 3 × Interval.
	StaleAfter time.Duration
	// Hostname overrides the snapshot's hostname when set.
	Hostname string
	Logger   *slog.Logger
	Clock    source.Clock
	// Registry holds the exporter's own metrics; attributors may register
	// theirs on it. A new one (with Go and process collectors) when nil.
	Registry *prometheus.Registry
	// OnCollect, when set, receives every rendered collection (the embedded
	// store of the agent uses it). It runs on the collection goroutine.
	OnCollect func(snap *source.Snapshot, families []*dto.MetricFamily)
}

// Exposition is one rendered collection.
type Exposition struct {
	Time     time.Time
	Source   string
	Snapshot *source.Snapshot
	Families []*dto.MetricFamily
	Text     []byte

	gzipOnce sync.Once
	gz       []byte
}

// Gzipped returns Text compressed, computed once per exposition.
func (e *Exposition) Gzipped() []byte {
	e.gzipOnce.Do(func() {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
		_, _ = w.Write(e.Text)
		_ = w.Close()
		e.gz = b.Bytes()
	})
	return e.gz
}

// Collector collects in the background.
type Collector struct {
	opts     Options
	latest   atomic.Pointer[Exposition]
	lastGood atomic.Int64 // unix nanoseconds of the last successful collection
	lastErr  atomic.Pointer[string]

	collectErrors *prometheus.CounterVec
	truncated     *prometheus.CounterVec
	// holdersDropped counts holders past MaxHoldersPerDevice.
	holdersDropped prometheus.Counter
	lastCollect    prometheus.Gauge
	duration       prometheus.Histogram
	mu             sync.Mutex // serialises CollectOnce
	buf            bytes.Buffer
}

// New builds a Collector. It does not collect until Run or CollectOnce.
func New(opts Options) (*Collector, error) {
	if opts.Source == nil {
		return nil, errors.New("collector: no source")
	}
	if opts.Interval <= 0 {
		return nil, fmt.Errorf("collector: collect interval must be positive, got %s", opts.Interval)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = opts.Interval
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = 3 * opts.Interval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = source.SystemClock{}
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	c := &Collector{
		opts:           opts,
		collectErrors:  schema.CollectErrors.CounterVec(),
		truncated:      schema.LabelsTruncated.CounterVec(),
		holdersDropped: schema.HoldersDropped.Counter(),
		lastCollect:    schema.LastCollect.Gauge(),
		duration:       schema.CollectDuration.Histogram(),
	}
	for _, col := range []prometheus.Collector{c.collectErrors, c.truncated, c.holdersDropped, c.lastCollect, c.duration, buildinfo.Collector()} {
		if err := opts.Registry.Register(col); err != nil {
			return nil, fmt.Errorf("collector: register self metrics: %w", err)
		}
	}
	return c, nil
}

// Registry returns the registry of the exporter's own metrics.
func (c *Collector) Registry() *prometheus.Registry { return c.opts.Registry }

// Run collects at once, then every Interval until ctx ends.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		if _, err := c.CollectOnce(ctx); err != nil && ctx.Err() == nil {
			c.opts.Logger.Warn("collection failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CollectOnce reads the source, attributes, renders and publishes one exposition.
func (c *Collector) CollectOnce(ctx context.Context) (*Exposition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	snap, err := c.opts.Source.Collect(cctx)
	cancel()
	if err != nil {
		c.collectErrors.WithLabelValues("source").Inc()
		msg := err.Error()
		c.lastErr.Store(&msg)
		return nil, fmt.Errorf("collect from %s: %w", c.opts.Source.Name(), err)
	}
	if c.opts.Hostname != "" {
		snap.Hostname = c.opts.Hostname
	}
	if snap.Time.IsZero() {
		snap.Time = c.opts.Clock.Now()
	}
	for _, a := range c.opts.Attributors {
		a.Attribute(snap)
	}
	for _, e := range snap.Errors {
		c.collectErrors.WithLabelValues(e.Field).Inc()
	}
	families, stats := RenderCounting(snap)
	for name, n := range stats.Truncated {
		c.truncated.WithLabelValues(name).Add(float64(n))
	}
	c.holdersDropped.Add(float64(stats.HoldersDropped))
	c.duration.Observe(time.Since(start).Seconds())
	c.lastCollect.Set(float64(snap.Time.UnixNano()) / 1e9)
	self, err := c.opts.Registry.Gather()
	if err != nil {
		c.opts.Logger.Warn("gather self metrics", "err", err)
	}
	families = append(families, self...)

	c.buf.Reset()
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(&c.buf, mf); err != nil {
			return nil, fmt.Errorf("render %s: %w", mf.GetName(), err)
		}
	}
	text := make([]byte, c.buf.Len())
	copy(text, c.buf.Bytes())
	e := &Exposition{Time: snap.Time, Source: c.opts.Source.Name(), Snapshot: snap, Families: families, Text: text}
	c.latest.Store(e)
	c.lastGood.Store(c.opts.Clock.Now().UnixNano())
	c.lastErr.Store(nil)
	if c.opts.OnCollect != nil {
		c.opts.OnCollect(snap, families)
	}
	return e, nil
}

// Latest returns the newest exposition, or nil before the first collection.
func (c *Collector) Latest() *Exposition { return c.latest.Load() }

// Health says whether collections are fresh; reason explains a false.
func (c *Collector) Health() (ok bool, reason string) {
	last := c.lastGood.Load()
	if last == 0 {
		if e := c.lastErr.Load(); e != nil {
			return false, "no successful collection yet: " + *e
		}
		return false, "no successful collection yet"
	}
	age := c.opts.Clock.Now().Sub(time.Unix(0, last))
	if age > c.opts.StaleAfter {
		r := fmt.Sprintf("last successful collection %s ago (stale after %s)", age.Round(time.Millisecond), c.opts.StaleAfter)
		if e := c.lastErr.Load(); e != nil {
			r += ": " + *e
		}
		return false, r
	}
	return true, "ok"
}
