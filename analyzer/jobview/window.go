package jobview

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// device is one GPU of the job as its series name it.
type device struct {
	key                          string // UUID, or UUID/GI
	uuid, gi, index, model, prof string
	host                         string
}

func deviceKey(m model.Metric) string {
	k := string(m[schema.LabelUUID])
	if gi := m[schema.LabelGIID]; gi != "" {
		k += "/" + string(gi)
	}
	return k
}

// locate finds the job's devices and the first and last sample of its
// series within the lookback: a coarse pass over the whole lookback, then
// a pass at one-second resolution over the first and the last bucket.
func locate(ctx context.Context, o Options, sel string) (time.Time, time.Time, []device, error) {
	bucket := (o.Lookback / coarsePoints).Round(time.Second)
	bucket = max(bucket, time.Second)
	from := o.Now.Add(-o.Lookback).Add(bucket)
	fb := schema.FBUsed.Name + sel
	// Every bucket is (t-bucket, t]: its range is a millisecond short, so
	// that Prometheus 2.x (closed on the left) and 3.x (open) agree on a
	// sample sitting on an edge, as a 60 s scrape aligned to the minute does.
	v, err := o.Querier.QueryRange(ctx, fmt.Sprintf("count_over_time(%s[%s])", fb, rangeOf(bucket-time.Millisecond)),
		query.Range{Start: from, End: o.Now, Step: bucket})
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	m, _ := v.(model.Matrix)
	var first, last time.Time
	seen := map[string]bool{}
	var devs []device
	for _, ss := range m {
		for _, p := range ss.Values {
			if p.Value <= 0 {
				continue
			}
			t := p.Timestamp.Time()
			if first.IsZero() || t.Before(first) {
				first = t
			}
			if t.After(last) {
				last = t
			}
		}
		k := deviceKey(ss.Metric)
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		devs = append(devs, device{key: k, uuid: string(ss.Metric[schema.LabelUUID]), gi: string(ss.Metric[schema.LabelGIID]),
			index: string(ss.Metric[schema.LabelGPU]), model: string(ss.Metric[schema.LabelModelName]),
			prof: string(ss.Metric[schema.LabelGIProfile]), host: features.Host(ss.Metric)})
	}
	if first.IsZero() || len(devs) == 0 {
		return time.Time{}, time.Time{}, nil, fmt.Errorf("%w in the last %s (is it older than the retention, or not a GPU job?)", ErrNoData, model.Duration(o.Lookback))
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].before(devs[j]) })
	fb0, b0, err := narrow(ctx, o.Querier, fb, first, bucket, false)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	fb1, b1, err := narrow(ctx, o.Querier, fb, last, bucket, true)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	ts := "timestamp(" + fb + ")"
	lo, err := extreme(ctx, o.Querier, "min("+ts+")", fb0.Add(-b0), fb0, false)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	hi, err := extreme(ctx, o.Querier, "max("+ts+")", fb1.Add(-b1), fb1, true)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	if lo.IsZero() || hi.IsZero() || hi.Before(lo) {
		return time.Time{}, time.Time{}, nil, fmt.Errorf("%w: its samples could not be placed in time", ErrNoData)
	}
	return lo, hi, devs, nil
}

// narrowBy is how many finer buckets one bucket is split into per pass.
const narrowBy = 60

// narrow splits the bucket (t-b, t] into finer ones until they are at most
// a minute long, keeping the first (or last) that holds samples of expr.
func narrow(ctx context.Context, q query.Querier, expr string, t time.Time, b time.Duration, last bool) (time.Time, time.Duration, error) {
	for b > narrowBy*time.Second {
		s := ((b + narrowBy - 1) / narrowBy).Round(time.Second)
		k := int((b + s - 1) / s)
		v, err := q.QueryRange(ctx, fmt.Sprintf("sum(count_over_time(%s[%s]))", expr, rangeOf(s-time.Millisecond)),
			query.Range{Start: t.Add(-time.Duration(k-1) * s), End: t, Step: s})
		if err != nil {
			return time.Time{}, 0, err
		}
		m, _ := v.(model.Matrix)
		var found time.Time
		for _, ss := range m {
			for _, p := range ss.Values {
				at := p.Timestamp.Time()
				if p.Value > 0 && (found.IsZero() || (last && at.After(found)) || (!last && at.Before(found))) {
					found = at
				}
			}
		}
		if found.IsZero() {
			return t, b, nil // cannot happen with the data unchanged: keep the coarse bucket
		}
		t, b = found, s
	}
	return t, b, nil
}

// extreme returns the least (or greatest) value of a timestamp() range
// query over (from, to] at one-second steps: the first (last) sample.
func extreme(ctx context.Context, q query.Querier, expr string, from, to time.Time, greatest bool) (time.Time, error) {
	v, err := q.QueryRange(ctx, expr, query.Range{Start: from.Add(time.Second), End: to, Step: time.Second})
	if err != nil {
		return time.Time{}, err
	}
	m, _ := v.(model.Matrix)
	best := math.NaN()
	for _, ss := range m {
		for _, p := range ss.Values {
			x := float64(p.Value)
			if x <= float64(from.Unix()) {
				continue // a sample before the bucket, seen through the lookback delta
			}
			if math.IsNaN(best) || (greatest && x > best) || (!greatest && x < best) {
				best = x
			}
		}
	}
	if math.IsNaN(best) {
		return time.Time{}, nil
	}
	return time.UnixMilli(int64(math.Round(best * 1000))).UTC(), nil
}

func rangeOf(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// before orders a job's GPUs as people number them: by host, then by the
// GPU index as a number (0, 1, 2, ... 10, not by UUID or as text), then
// MIG instance; the key settles the rest.
func (d device) before(e device) bool {
	if d.host != e.host {
		return d.host < e.host
	}
	di, derr := strconv.Atoi(d.index)
	ei, eerr := strconv.Atoi(e.index)
	switch {
	case derr == nil && eerr == nil && di != ei:
		return di < ei
	case (derr == nil) != (eerr == nil):
		return derr == nil // a GPU with an index before one without
	}
	dg, _ := strconv.Atoi(d.gi)
	eg, _ := strconv.Atoi(e.gi)
	if dg != eg {
		return dg < eg
	}
	return d.key < e.key
}
