package jobview

import (
	"context"
	"math"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sparklines reads per-interval util and memory, then each GPU's coverage.
func sparklines(ctx context.Context, o Options, sel string, r *Report) error {
	span := r.End.Sub(r.Start)
	step := max((span / time.Duration(o.Points)).Truncate(time.Second), time.Second)
	n := int(span / step)
	if n < 1 {
		return nil
	}
	rg := query.Range{Start: r.End.Add(-time.Duration(n-1) * step), End: r.End, Step: step}
	win := "[" + rangeOf(step-time.Millisecond) + "]"
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	exprs := []string{
		"avg" + by + "(avg_over_time(" + schema.GPUUtil.Name + sel + win + "))",
		"max" + by + "(max_over_time(" + schema.FBUsed.Name + sel + win + "))",
	}
	ms := make([]map[string][]*float64, len(exprs))
	calls := []query.Call{query.Ranged(exprs[0], rg), query.Ranged(exprs[1], rg)}
	err := query.FanEach(ctx, o.Querier, calls, len(calls), func(i int, v model.Value) {
		m, _ := v.(model.Matrix)
		ms[i] = series(m, rg, n)
	})
	if err != nil {
		return err
	}
	for i := range r.GPUs {
		g := &r.GPUs[i]
		g.SparkUtil, g.SparkMem, g.SparkStep = ms[0][g.Device], ms[1][g.Device], model.Duration(step).String()
	}
	return coverage(ctx, o, sel, r)
}

// maxCoveragePoints bounds the buckets coverage is counted in, so that a
// month-long job stays one cheap range query.
const maxCoveragePoints = 2000

// coverage sets each GPU's share of the job's span that its samples cover,
// judged against its own scrape interval, learnt from its samples: the
// span is cut into buckets of at least four of the GPU's mean sample
// spacings, a bucket holding the count most buckets hold is full, and one
// holding fewer is that much short (one sample short is scrape jitter, as
// features.FullShare says, not a gap). A job scraped every 15 s without a gap
// is fully covered however short its span, and one whose exporter was down
// for half of it is half covered; a target scraped every 60 s is judged by
// its own cadence, not by the fastest one's.
func coverage(ctx context.Context, o Options, sel string, r *Report) error {
	span := r.End.Sub(r.Start)
	var spacing time.Duration
	for _, g := range r.GPUs {
		if g.Samples > 1 {
			spacing = max(spacing, span/time.Duration(g.Samples-1))
		}
	}
	b := max(4*spacing, span/maxCoveragePoints, time.Second).Truncate(time.Millisecond)
	n := int(span / b)
	if spacing == 0 || n < 2 {
		// Too few samples or too short a span to show a gap: nothing is
		// known to be missing (finish says when it is too little to judge).
		for i := range r.GPUs {
			if r.GPUs[i].Samples > 0 {
				r.GPUs[i].Coverage = 1
			}
		}
		return nil
	}
	rg := query.Range{Start: r.End.Add(-time.Duration(n-1) * b), End: r.End, Step: b}
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	v, err := o.Querier.QueryRange(ctx, "sum"+by+"(count_over_time("+schema.FBUsed.Name+sel+"["+rangeOf(b-time.Millisecond)+"]))", rg)
	if err != nil {
		return err
	}
	m, _ := v.(model.Matrix)
	counts := series(m, rg, n)
	for i := range r.GPUs {
		g := &r.GPUs[i]
		var seen []float64
		for _, p := range counts[g.Device] {
			if p != nil && *p > 0 {
				seen = append(seen, *p)
			}
		}
		full := features.ModeCount(seen)
		if full <= 0 {
			continue
		}
		var got float64
		for _, p := range counts[g.Device] {
			if p != nil {
				got += features.FullShare(*p, full)
			}
		}
		g.Coverage = got / float64(n)
	}
	return nil
}

// series lays each device's points on the n steps of rg (nil: no value).
func series(m model.Matrix, rg query.Range, n int) map[string][]*float64 {
	out := map[string][]*float64{}
	for _, ss := range m {
		pts := make([]*float64, n)
		for _, p := range ss.Values {
			i := int(p.Timestamp.Time().Sub(rg.Start) / rg.Step)
			if i < 0 || i >= n {
				continue
			}
			x := float64(p.Value)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			pts[i] = &x
		}
		out[deviceKey(ss.Metric)] = pts
	}
	return out
}

// maxSteps bounds the analysis steps of one job view (35 days at 5m).
const maxSteps = 10080
