// Package demand reads what each allocation asks of its GPU over a window,
// in two dimensions: compute (DCGM_FI_PROF_SM_ACTIVE as a fraction of the
// whole GPU, or GPU util where the profiling fields are absent) and memory
// (framebuffer used), each as p50, p95 and peak, plus an hourly profile of
// compute (p95 and peak per hour) and of presence (samples per hour).
//
// Every figure is one aggregate query over the whole fleet, so Fetch issues
// Queries queries whatever the fleet size and the window's length; the
// expressions run on the Prometheus HTTP API and on the embedded TSDB alike.
package demand

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Stats are the quantiles of one dimension over the allocation's samples.
type Stats struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Peak float64 `json:"peak"`
}

// Item is one holder of one device over the window: an allocation's share
// of a GPU or MIG instance, or (Job == "") the device's unallocated time.
type Item struct {
	Pool    string  `json:"pool"`
	Host    string  `json:"host"`
	Device  string  `json:"device"` // UUID, or UUID/GI for a MIG instance
	UUID    string  `json:"uuid"`
	Model   string  `json:"model"`
	Job     string  `json:"job,omitempty"`
	Team    string  `json:"team,omitempty"`
	User    string  `json:"user,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	Samples float64 `json:"samples"`
	// Compute is a fraction of the whole GPU (0-1): on a MIG instance the
	// instance's SM activity is scaled by its share of the GPU.
	Compute    Stats `json:"compute"`
	HasCompute bool  `json:"-"`
	// Memory is framebuffer used in MiB; TotalMiB the device's memory.
	Memory    Stats   `json:"memory_mib"`
	HasMemory bool    `json:"-"`
	TotalMiB  float64 `json:"total_mib"`
	// HourP95 and HourPeak are compute per hour of the window (NaN where
	// the holder had no sample); HourSamples the samples per hour.
	HourP95     []float64 `json:"-"`
	HourPeak    []float64 `json:"-"`
	HourSamples []float64 `json:"-"`
}

// Key identifies the item: host|device|job.
func (it *Item) Key() string { return it.Host + "|" + it.Device + "|" + it.Job }

// Present reports whether the holder had samples in hour h.
func (it *Item) Present(h int) bool { return h < len(it.HourSamples) && it.HourSamples[h] > 0 }

// Result is what Fetch read.
type Result struct {
	From, To time.Time
	Hours    int
	Items    []Item
	// Expected is the sample count of the best-covered device over the
	// window; a device's coverage is its samples over this.
	Expected float64
	// DeviceSamples counts the samples per host|device over all holders.
	DeviceSamples map[string]float64
}

// Coverage is the share of expected device samples that arrived, over
// the devices the window saw.
func (r *Result) Coverage() float64 {
	if r.Expected <= 0 || len(r.DeviceSamples) == 0 {
		return 0
	}
	var got float64
	for _, n := range r.DeviceSamples {
		got += math.Min(n, r.Expected)
	}
	return got / (r.Expected * float64(len(r.DeviceSamples)))
}

// Queries is the number of queries Fetch issues.
const Queries = 10

type figure int

// Each full pass over a week of samples costs the most, so the window's
// peaks and sample counts are read from the hourly ranges (the peak of the
// hourly peaks, the sum of the hourly counts: exact, not estimates), and
// the quantiles, which need every sample, are the only whole-window passes.
const (
	qComputeP50 figure = iota
	qComputeP95
	qMemP50
	qMemP95
	qTotal
	qInfo
	qHourP95
	qHourPeak
	qHourCount
	qHourMem
)

// Exprs returns the instant expressions over a window of length w and the
// hourly range expressions, in figure order. Ranges are one millisecond
// short so that Prometheus 2.x and 3.x agree on a sample at the left edge.
func Exprs(w time.Duration) []string {
	win := fmt.Sprintf("[%dms]", w.Milliseconds()-1)
	hour := fmt.Sprintf("[%dms]", time.Hour.Milliseconds()-1)
	compute := func(fn, arg, rng string) string {
		// SM activity where the profiling fields exist, util elsewhere:
		// `or` keeps util only for series that have no SM activity.
		return fn + "(" + arg + schema.ProfSMActive.Name + rng + ") or " +
			fn + "(" + arg + schema.GPUUtil.Name + rng + ") / 100"
	}
	mem := func(fn, arg string) string { return fn + "(" + arg + schema.FBUsed.Name + win + ")" }
	return []string{
		qComputeP50: compute("quantile_over_time", "0.5, ", win),
		qComputeP95: compute("quantile_over_time", "0.95, ", win),
		qMemP50:     mem("quantile_over_time", "0.5, "),
		qMemP95:     mem("quantile_over_time", "0.95, "),
		// The device's memory is used + free at any instant: one reading
		// an hour is enough.
		qTotal: "max_over_time((" + schema.FBUsed.Name + " + " + schema.FBFree.Name + ")" +
			fmt.Sprintf("[%dms:1h]", w.Milliseconds()-1) + ")",
		qInfo:      "max_over_time(" + schema.AllocationInfo.Name + win + ")",
		qHourP95:   compute("quantile_over_time", "0.95, ", hour),
		qHourPeak:  compute("max_over_time", "", hour),
		qHourCount: "count_over_time(" + schema.FBUsed.Name + hour + ")",
		qHourMem:   "max_over_time(" + schema.FBUsed.Name + hour + ")",
	}
}

// Options of a fetch.
type Options struct {
	// PoolLabel names a node label (e.g. a node group) that, with the
	// model, makes a pool; empty means one pool per model.
	PoolLabel string
	// Parallel bounds the queries in flight (default 4).
	Parallel int
}

// Fetch reads the demand of every holder of every device in [from, to).
// The window is cut to whole hours from `from`.
func Fetch(ctx context.Context, q query.Querier, from, to time.Time, o Options) (*Result, error) {
	from = from.Truncate(time.Millisecond)
	hours := int(to.Sub(from) / time.Hour)
	if hours < 1 {
		return nil, fmt.Errorf("fetch demand: window %s shorter than an hour", to.Sub(from))
	}
	to = from.Add(time.Duration(hours) * time.Hour)
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	exprs := Exprs(to.Sub(from))
	results := make([]model.Value, len(exprs))
	errs := make([]error, len(exprs))
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, o.Parallel)
	var wg sync.WaitGroup
	for f, expr := range exprs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			var v model.Value
			var err error
			if figure(f) >= qHourP95 {
				v, err = q.QueryRange(qctx, expr, query.Range{Start: from.Add(time.Hour), End: to, Step: time.Hour})
			} else {
				v, err = q.Query(qctx, expr, to)
			}
			if err != nil {
				errs[f] = err
				cancel()
				return
			}
			results[f] = v
		}()
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || errors.Is(first, context.Canceled)) {
			first = err
		}
	}
	if first != nil {
		return nil, fmt.Errorf("fetch demand: %w", first)
	}
	r := &Result{From: from, To: to, Hours: hours, DeviceSamples: map[string]float64{}}
	items := map[string]*Item{}
	get := func(m model.Metric) *Item {
		id, ok := features.Identify(m)
		if !ok {
			return nil
		}
		key := id.Host + "|" + id.Device + "|" + id.Job
		it := items[key]
		if it == nil {
			it = &Item{Host: id.Host, Device: id.Device, UUID: id.UUID, Model: id.Model, Job: id.Job,
				Pool: pool(m, id.Model, o.PoolLabel)}
			it.HourP95, it.HourPeak, it.HourSamples = nanSlice(hours), nanSlice(hours), make([]float64, hours)
			items[key] = it
		}
		return it
	}
	type info struct{ team, user, kind string }
	infos := map[string]info{}
	for f, v := range results {
		switch val := v.(type) {
		case model.Vector:
			for _, s := range val {
				x := float64(s.Value)
				if math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				if figure(f) == qInfo {
					id, ok := features.Identify(s.Metric)
					if !ok || x <= 0 {
						continue
					}
					job := string(s.Metric[schema.LabelJob])
					if job == "" {
						job = id.Job
					}
					infos[id.Host+"|"+id.Device+"|"+job] = info{team: string(s.Metric[schema.LabelTeam]),
						user: string(s.Metric[schema.LabelUser]), kind: strings.ToLower(string(s.Metric[schema.LabelKind]))}
					continue
				}
				it := get(s.Metric)
				if it == nil {
					continue
				}
				setInstant(it, figure(f), x, s.Metric)
			}
		case model.Matrix:
			for _, ss := range val {
				it := get(ss.Metric)
				if it == nil {
					continue
				}
				scale := 1.0
				if figure(f) == qHourP95 || figure(f) == qHourPeak {
					scale = migScale(ss.Metric, it.Model)
				}
				for _, p := range ss.Values {
					h := int(p.Timestamp.Time().Sub(from)/time.Hour) - 1
					x := float64(p.Value)
					if h < 0 || h >= hours || math.IsNaN(x) || math.IsInf(x, 0) {
						continue
					}
					switch figure(f) {
					case qHourP95:
						it.HourP95[h] = x * scale
					case qHourPeak:
						it.HourPeak[h] = x * scale
					case qHourCount:
						it.HourSamples[h] = x
						it.Samples += x
					case qHourMem:
						it.Memory.Peak = max(it.Memory.Peak, x)
					}
				}
			}
		default:
			return nil, fmt.Errorf("fetch demand: %q returned %s", exprs[f], v.Type())
		}
	}
	for _, it := range items {
		if it.Samples <= 0 {
			continue // a holder without memory samples was not there
		}
		for _, x := range it.HourPeak {
			if !math.IsNaN(x) {
				it.Compute.Peak = max(it.Compute.Peak, x)
			}
		}
		if in, ok := infos[it.Key()]; ok {
			it.Team, it.User, it.Kind = in.team, in.user, in.kind
		}
		r.Items = append(r.Items, *it)
		d := it.Host + "|" + it.Device
		r.DeviceSamples[d] += it.Samples
	}
	for _, n := range r.DeviceSamples {
		r.Expected = max(r.Expected, n)
	}
	sort.Slice(r.Items, func(a, b int) bool { return r.Items[a].Key() < r.Items[b].Key() })
	return r, nil
}

func setInstant(it *Item, f figure, x float64, m model.Metric) {
	switch f {
	case qComputeP50, qComputeP95:
		x *= migScale(m, it.Model)
		it.HasCompute = true
		switch f {
		case qComputeP50:
			it.Compute.P50 = x
		case qComputeP95:
			it.Compute.P95 = x
		}
	case qMemP50:
		it.Memory.P50, it.HasMemory = x, true
	case qMemP95:
		it.Memory.P95 = x
	case qTotal:
		it.TotalMiB = x
	}
}

// migScale turns a MIG instance's SM activity (a share of its own SMs) into
// a share of the whole GPU.
func migScale(m model.Metric, modelName string) float64 {
	prof := string(m[schema.LabelGIProfile])
	if prof == "" {
		return 1
	}
	g, ok := mig.Lookup(modelName)
	if !ok {
		return 1
	}
	p, ok := g.Profile(prof)
	if !ok {
		return 1
	}
	return float64(p.Compute) / float64(g.ComputeSlices)
}

func pool(m model.Metric, modelName, label string) string {
	name := strings.TrimPrefix(modelName, "NVIDIA ")
	if label == "" {
		return name
	}
	if v := string(m[model.LabelName(label)]); v != "" {
		return name + "/" + v
	}
	return name
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}
