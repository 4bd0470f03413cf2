// Package demand reads what each allocation asks of its GPU over a window,
// in two dimensions: compute (DCGM_FI_PROF_SM_ACTIVE as a fraction of the
// whole GPU, or GPU util where the profiling fields are absent) and memory
// (framebuffer used), each as p50, p95 and peak, plus an hourly profile of
// compute (mean, p95 and peak per hour) and of presence (samples per hour).
//
// Every figure is one aggregate range query over the whole fleet with a
// one-hour step, so Fetch issues Queries queries whatever the fleet size and
// the window's length, and Prometheus reads each sample once per figure
// (no whole-window quantile, which would sort every sample of a week per
// series). The window's quantiles are computed here from the hourly figures
// (see mixtureQuantile). The expressions run on the Prometheus HTTP API and
// on the embedded TSDB alike.
package demand

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
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
	// TimeShare is true when compute is GPU util (no profiling fields): the
	// share of time a kernel ran, whatever the share of SMs it used.
	TimeShare bool `json:"time_share,omitempty"`
	// Memory is framebuffer used in MiB; TotalMiB the device's memory.
	Memory    Stats   `json:"memory_mib"`
	HasMemory bool    `json:"-"`
	TotalMiB  float64 `json:"total_mib"`
	// HourMean, HourP95 and HourPeak are compute per hour of the window
	// (NaN where the holder had no sample); HourSamples the samples per
	// hour.
	// Single precision: a week of 80,000 holders is 168 hours each.
	HourMean    []float32 `json:"-"`
	HourP95     []float32 `json:"-"`
	HourPeak    []float32 `json:"-"`
	HourSamples []float32 `json:"-"`
	hourMemPeak []float32
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

// Queries is the number of queries Fetch issues: two series listings
// (index lookups that read no sample) and the figures. A Querier that
// cannot list series gets the figures alone.
const Queries = 2 + figures

type figure int

// The figures, each one query. Only the device's total memory and the
// allocation info are instant queries; both are cheap (the total is read
// once an hour, the info series are one per allocation).
const (
	qTotal figure = iota
	qInfo
	qHourMean
	qHourP95
	qHourPeak
	qHourCount
	qHourMem
	figures = iota
)

// Source is where compute is read from.
type Source int

// Sources of compute. Listing the series first (from the index alone)
// spares Prometheus a pass over every sample of the metric a fleet does
// not need: a query `a or b` evaluates both sides in full.
const (
	// Both: SM activity where a holder has it, util elsewhere.
	Both Source = iota
	// SMOnly: every holder with util also has SM activity.
	SMOnly
	// UtilOnly: no holder has SM activity (stock dcgm-exporter).
	UtilOnly
)

// SourceLabel marks the series whose compute is GPU util (time share)
// rather than SM activity, in the compute figures' results.
const SourceLabel = "gpuwatch_compute_source"

// Exprs returns the instant expressions over a window of length w and the
// hourly range expressions, in figure order, reading compute from src.
// Ranges are one millisecond short so that Prometheus 2.x and 3.x agree on
// a sample at the left edge.
func Exprs(w time.Duration, src Source) []string {
	win := fmt.Sprintf("[%dms]", w.Milliseconds()-1)
	hour := fmt.Sprintf("[%dms]", time.Hour.Milliseconds()-1)
	compute := func(fn string) string {
		arg := ""
		if fn == "quantile_over_time" {
			arg = "0.95, "
		}
		sm := fn + "(" + arg + schema.ProfSMActive.Name + hour + ")"
		// Util is labelled so that the planner knows it reads a time share.
		util := "label_replace(" + fn + "(" + arg + schema.GPUUtil.Name + hour + ") / 100, \"" + SourceLabel + "\", \"util\", \"\", \"\")"
		switch src {
		case SMOnly:
			return sm
		case UtilOnly:
			return util
		}
		// `or` keeps util only for series that have no SM activity.
		return sm + " or ignoring(" + SourceLabel + ") " + util
	}
	return []string{
		// The device's memory is used + free at any instant: one reading
		// an hour is enough.
		qTotal: "max_over_time((" + schema.FBUsed.Name + " + " + schema.FBFree.Name + ")" +
			fmt.Sprintf("[%dms:1h]", w.Milliseconds()-1) + ")",
		qInfo:      "max_over_time(" + schema.AllocationInfo.Name + win + ")",
		qHourMean:  compute("avg_over_time"),
		qHourP95:   compute("quantile_over_time"),
		qHourPeak:  compute("max_over_time"),
		qHourCount: "count_over_time(" + schema.FBUsed.Name + hour + ")",
		qHourMem:   "max_over_time(" + schema.FBUsed.Name + hour + ")",
	}
}

// Options of a fetch.
type Options struct {
	// PoolLabel names a node label (e.g. a node group) that, with the
	// model, makes a pool; empty means one pool per model.
	PoolLabel string
	// Parallel bounds the queries in flight and the answers held (default 3).
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
		o.Parallel = 3
	}
	src, err := source(ctx, q, from, to)
	if err != nil {
		return nil, fmt.Errorf("fetch demand: %w", err)
	}
	exprs := Exprs(to.Sub(from), src)
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
			it.HourMean, it.HourP95, it.HourPeak = nanSlice(hours), nanSlice(hours), nanSlice(hours)
			it.HourSamples, it.hourMemPeak = make([]float32, hours), nanSlice(hours)
			items[key] = it
		}
		return it
	}
	type info struct{ team, user, kind string }
	infos := map[string]info{}
	apply := func(f figure, v model.Value) error {
		switch val := v.(type) {
		case model.Vector:
			for _, s := range val {
				x := float64(s.Value)
				if math.IsNaN(x) || math.IsInf(x, 0) {
					continue
				}
				if f == qInfo {
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
				setInstant(it, f, x, s.Metric)
			}
		case model.Matrix:
			for _, ss := range val {
				it := get(ss.Metric)
				if it == nil {
					continue
				}
				scale := 1.0
				switch f {
				case qHourMean, qHourP95, qHourPeak:
					scale = migScale(ss.Metric, it.Model)
					it.HasCompute = true
					it.TimeShare = ss.Metric[SourceLabel] != ""
				case qHourMem:
					it.HasMemory = true
				}
				for _, p := range ss.Values {
					h := int(p.Timestamp.Time().Sub(from)/time.Hour) - 1
					x := float64(p.Value)
					if h < 0 || h >= hours || math.IsNaN(x) || math.IsInf(x, 0) {
						continue
					}
					switch f {
					case qHourMean:
						it.HourMean[h] = float32(x * scale)
					case qHourP95:
						it.HourP95[h] = float32(x * scale)
					case qHourPeak:
						it.HourPeak[h] = float32(x * scale)
					case qHourCount:
						it.HourSamples[h] = float32(x)
						it.Samples += x
					case qHourMem:
						it.hourMemPeak[h] = float32(x)
						it.Memory.Peak = max(it.Memory.Peak, x)
					}
				}
			}
		default:
			return fmt.Errorf("%q returned %s", exprs[f], v.Type())
		}
		return nil
	}
	// Each answer is folded into the items as soon as it arrives and then
	// dropped: a query's slot is freed only once its answer is applied, so
	// at most Parallel answers are held at a time.
	type answer struct {
		f    figure
		v    model.Value
		err  error
		slot bool // the query held a slot, freed once its answer is applied
	}
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, o.Parallel)
	done := make(chan answer, len(exprs))
	go func() {
		for f, expr := range exprs {
			select {
			case sem <- struct{}{}:
			case <-qctx.Done():
				done <- answer{f: figure(f), err: qctx.Err()}
				continue
			}
			go func() {
				a := answer{f: figure(f), slot: true}
				if a.f >= qHourMean {
					a.v, a.err = q.QueryRange(qctx, expr, query.Range{Start: from.Add(time.Hour), End: to, Step: time.Hour})
				} else {
					a.v, a.err = q.Query(qctx, expr, to)
				}
				done <- a
			}()
		}
	}()
	var first error
	for range exprs {
		a := <-done
		switch {
		case a.err != nil:
			if first == nil || errors.Is(first, context.Canceled) {
				first = a.err
			}
			cancel()
		case first == nil:
			first = apply(a.f, a.v)
		}
		if a.slot {
			<-sem
		}
	}
	if first != nil {
		return nil, fmt.Errorf("fetch demand: %w", first)
	}
	for _, it := range items {
		if it.Samples <= 0 {
			continue // a holder without memory samples was not there
		}
		it.summarise()
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

// source lists the holders with SM activity and with util over the window
// and says which the compute figures must read.
func source(ctx context.Context, q query.Querier, from, to time.Time) (Source, error) {
	sl, ok := q.(query.SeriesLister)
	if !ok {
		return Both, nil
	}
	holders := func(name string) (map[string]bool, error) {
		ls, err := sl.Series(ctx, name, from, to)
		if err != nil {
			return nil, err
		}
		out := make(map[string]bool, len(ls))
		for _, l := range ls {
			if id, ok := features.Identify(model.Metric(l)); ok {
				out[id.Host+"|"+id.Device+"|"+id.Job] = true
			}
		}
		return out, nil
	}
	sm, err := holders(schema.ProfSMActive.Name)
	if errors.Is(err, errors.ErrUnsupported) {
		return Both, nil
	}
	if err != nil {
		return Both, err
	}
	util, err := holders(schema.GPUUtil.Name)
	if err != nil {
		return Both, err
	}
	if len(sm) == 0 {
		return UtilOnly, nil
	}
	for k := range util {
		if !sm[k] {
			return Both, nil
		}
	}
	return SMOnly, nil
}

func setInstant(it *Item, f figure, x float64, _ model.Metric) {
	if f == qTotal {
		it.TotalMiB = x
	}
}

// p95Z is the standard normal quantile at 0.95.
const p95Z = 1.6448536269514722

// summarise derives the window's statistics from the hourly figures. The
// window's compute quantiles are those of the mixture of its hours, each a
// normal distribution with the hour's mean and the spread that puts its
// p95 where it was measured, weighted by its samples and cut at the
// hour's peak; memory's are the quantiles of its hourly peaks (memory must
// fit at its peak).
func (it *Item) summarise() {
	var hs []hourDist
	for h := range it.HourMean {
		m, p, pk, n := float64(it.HourMean[h]), float64(it.HourP95[h]), float64(it.HourPeak[h]), float64(it.HourSamples[h])
		if math.IsNaN(m) {
			continue
		}
		if math.IsNaN(pk) {
			pk = m
		}
		if math.IsNaN(p) {
			p = pk
		}
		it.Compute.Peak = max(it.Compute.Peak, pk)
		hs = append(hs, hourDist{mean: m, sd: max(0, p-m) / p95Z, peak: pk, n: max(n, 1)})
	}
	if len(hs) > 0 {
		it.Compute.P50 = mixtureQuantile(hs, 0.5)
		it.Compute.P95 = mixtureQuantile(hs, 0.95)
	}
	var mem []float64
	for _, x := range it.hourMemPeak {
		if !math.IsNaN(float64(x)) {
			mem = append(mem, float64(x))
		}
	}
	if len(mem) > 0 {
		sort.Float64s(mem)
		it.Memory.P50, it.Memory.P95 = rank(mem, 0.5), rank(mem, 0.95)
	}
	it.hourMemPeak = nil
}

// hourDist summarises one hour of samples.
type hourDist struct{ mean, sd, peak, n float64 }

// cdf is the share of the hour's samples at or below x.
func (d hourDist) cdf(x float64) float64 {
	switch {
	case x >= d.peak:
		return 1
	case d.sd <= 0:
		if x >= d.mean {
			return 1
		}
		return 0
	}
	return 0.5 * math.Erfc(-(x-d.mean)/(d.sd*math.Sqrt2))
}

// mixtureQuantile is the q-quantile of the samples of all hours, found by
// bisection on the mixture's distribution function.
func mixtureQuantile(hs []hourDist, q float64) float64 {
	lo, hi, total := math.Inf(1), 0.0, 0.0
	for _, d := range hs {
		lo = min(lo, max(0, d.mean-4*d.sd))
		hi = max(hi, d.peak)
		total += d.n
	}
	for i := 0; i < 30 && hi-lo > 1e-4; i++ {
		x := (lo + hi) / 2
		var c float64
		for _, d := range hs {
			c += d.n * d.cdf(x)
		}
		if c >= q*total {
			hi = x
		} else {
			lo = x
		}
	}
	return hi
}

// rank is the q-quantile of sorted xs by nearest rank.
func rank(xs []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
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

func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}
