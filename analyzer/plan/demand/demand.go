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
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
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
	// HourMemPeak is the highest framebuffer used per hour (MiB; NaN where
	// the holder had no sample): the memory demand the forecast sums.
	HourMemPeak []float32 `json:"-"`
	poolLabel   string
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
	// Expected is the sample count of a device present all through the
	// window asked for, at the data's resolution; a device's coverage is
	// its samples over this.
	Expected float64
	// HistoryHours counts the window's clock hours from the first that
	// holds a sample to the end: the history the packing's hourly peaks
	// and the forecast's seasons have to go on.
	HistoryHours int
	// DeviceSamples counts the samples per host|device over all holders.
	DeviceSamples map[string]float64
	// Read is where the figures came from, Reason why (or, from the
	// recording rules, what they cover), Queries how many queries it took.
	Read    Read
	Reason  string
	Queries int
	// PoolsBy says how the pools were named (package pools).
	PoolsBy []string
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

// Read says where the figures came from.
type Read string

// Reads of a fetch.
const (
	ReadRaw      Read = "raw series"
	ReadRecorded Read = "recording rules"
)

// Rules says whether Fetch reads the recording rules' figures.
type Rules string

// Modes of reading the recording rules.
const (
	// RulesAuto reads them when they cover the window (checked first, with
	// Probes cheap queries), raw series otherwise.
	RulesAuto Rules = "auto"
	// RulesOff always reads raw series.
	RulesOff Rules = "off"
	// RulesOnly reads the recording rules and fails when they do not
	// cover the window.
	RulesOnly Rules = "only"
)

// Set parses a mode (a flag's value).
func (r *Rules) Set(s string) error {
	switch Rules(s) {
	case RulesAuto, RulesOff, RulesOnly:
		*r = Rules(s)
		return nil
	}
	return fmt.Errorf("recording rules %q: want auto, off or only", s)
}

func (r Rules) String() string { return string(r) }

// The number of queries Fetch issues, whatever the fleet size and the
// window's length: from raw series, two series listings (index lookups
// that read no sample; a Querier that cannot list series gets the figures
// alone) and the figures; from the recording rules, the figures; and in
// RulesAuto, Probes more before either.
const (
	QueriesRaw      = 2 + figures
	QueriesRecorded = figures
	Probes          = 5
)

type figure int

// The figures, each one query. Only the allocation info and, from raw
// series, the device's total memory are instant queries; both are cheap
// (the total is read once an hour, the info series are one per
// allocation). From the recording rules the total is read as stored, like
// the hourly figures.
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

// hourlyOf is the hourly figure of each range figure.
var hourlyOf = map[figure]hourly.Figure{
	qHourMean: hourly.Mean, qHourP95: hourly.P95, qHourPeak: hourly.Peak,
	qHourCount: hourly.Count, qHourMem: hourly.MemPeak,
}

// recordedOf is the recorded figure each figure reads from the recording
// rules: the hourly ones and the device total.
var recordedOf = func() map[figure]hourly.Figure {
	m := map[figure]hourly.Figure{qTotal: hourly.Total}
	for f, h := range hourlyOf {
		m[f] = h
	}
	return m
}()

// Source is where compute is read from.
type Source = hourly.Source

// Sources of compute. Listing the series first (from the index alone)
// spares Prometheus a pass over every sample of the metric a fleet does
// not need: a query `a or b` evaluates both sides in full.
const (
	Both     = hourly.Both
	SMOnly   = hourly.SMOnly
	UtilOnly = hourly.UtilOnly
)

// SourceLabel marks the series whose compute is GPU util (time share)
// rather than SM activity, in the compute figures' results.
const SourceLabel = hourly.SourceLabel

// Exprs returns, in figure order, the instant expressions over a window of
// length w (evaluated at its end) and the hourly range expressions
// (evaluated at the end of each hour), from raw series reading compute from
// src, or from the recording rules (evaluated hourly.Lag later).
func Exprs(w time.Duration, src Source, recorded bool) []string {
	out := make([]string, figures)
	if recorded {
		// The window's recorded points are stored in [from+1h, to+1h).
		// The hourly figures are read as the points stored, one instant
		// query each: a range query would have Prometheus select every
		// holder's series once per hour of the window.
		// The device total is read the same way, its highest point kept:
		// as stored chunks it costs Prometheus less than max_over_time
		// evaluated over every holder's week.
		win := fmt.Sprintf("[%dms] offset 1ms", w.Milliseconds())
		for f, h := range recordedOf {
			out[f] = hourly.Record(h) + win
		}
	} else {
		// The total at every hour boundary in (from, to].
		out[qTotal] = "max_over_time((" + hourly.Raw(hourly.Total, src) + fmt.Sprintf(")[%dms:1h])", w.Milliseconds()-1)
		for f, h := range hourlyOf {
			out[f] = hourly.Raw(h, src)
		}
	}
	// Allocation info is a series per allocation: cheap to read raw.
	out[qInfo] = "max_over_time(" + schema.AllocationInfo.Name + fmt.Sprintf("[%dms] offset 1ms)", w.Milliseconds())
	return out
}

// Options of a fetch.
type Options struct {
	// Pools say where the pools come from (package pools).
	Pools pools.Options
	// Parallel bounds the queries in flight and the answers held (default 3).
	Parallel int
	// Rules says whether to read the recording rules (default RulesAuto).
	Rules Rules
}

// Fetch reads the demand of every holder of every device in [from, to),
// cut to whole clock hours (from rounded up, to down).
func Fetch(ctx context.Context, q query.Querier, from, to time.Time, o Options) (*Result, error) {
	if t := from.Truncate(time.Hour); t.Before(from) {
		from = t.Add(time.Hour)
	}
	to = to.Truncate(time.Hour)
	hours := int(to.Sub(from) / time.Hour)
	if hours < 1 {
		return nil, fmt.Errorf("fetch demand: window %s to %s holds no whole clock hour", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if o.Parallel <= 0 {
		o.Parallel = 3
	}
	if o.Rules == "" {
		o.Rules = RulesAuto
	}
	r := &Result{From: from, To: to, Hours: hours, DeviceSamples: map[string]float64{}, Read: ReadRaw}
	recorded, src, err := chooseRead(ctx, q, r, o.Rules)
	if err != nil {
		return nil, err
	}
	to, hours = r.To, r.Hours
	exprs := Exprs(to.Sub(from), src, recorded)
	// A range figure's point at `at` is the hour [at-1h-lag, at-lag).
	lag := time.Duration(0)
	if recorded {
		lag = hourly.Lag
	}
	fd := &fold{from: from, hours: hours, lag: lag, points: recorded, poolLabel: o.Pools.Label, exprs: exprs,
		items: map[string]*Item{}, infos: map[string]holderInfo{}}
	if err := fetchAll(ctx, q, exprs, o.Parallel, recorded, from.Add(time.Hour+lag), to.Add(lag), fd.apply); err != nil {
		return nil, fmt.Errorf("fetch demand: %w", err)
	}
	fd.result(ctx, r, o.Pools)
	return r, nil
}

// chooseRead decides whether r's window is read from the recording rules
// (trimming its last hour off r when the rules lack only that one) or from
// the raw series, and from which raw source; it counts the queries that
// takes into r.
func chooseRead(ctx context.Context, q query.Querier, r *Result, rules Rules) (recorded bool, src Source, err error) {
	switch rules {
	case RulesOff:
		r.Reason = "recording rules not asked for"
	default:
		cov, err := probe(ctx, q, r.From, r.To)
		if err != nil {
			return false, src, fmt.Errorf("fetch demand: %w", err)
		}
		switch {
		case cov.ok:
			recorded = true
		case cov.trim && r.Hours > 1:
			recorded = true
			r.To, r.Hours = r.To.Add(-time.Hour), r.Hours-1
		}
		r.Reason = cov.reason
		r.Queries += Probes
		if !recorded && rules == RulesOnly {
			return false, src, fmt.Errorf("fetch demand: %s", cov.reason)
		}
	}
	src = Both
	if recorded {
		r.Read = ReadRecorded
		r.Queries += QueriesRecorded
		return true, src, nil
	}
	if src, err = source(ctx, q, r.From, r.To); err != nil {
		return false, src, fmt.Errorf("fetch demand: %w", err)
	}
	r.Queries += QueriesRaw
	return false, src, nil
}

// fetchAll runs exprs (the instant figures at end; the hourly figures
// hourly over [start, end] from raw series, or as the points the rules
// stored in the window, read at end as stored) at most parallel at a time,
// handing each answer to apply as it arrives; it returns the first error,
// not counting the cancellations it causes. Each answer is folded into the
// items as soon as it arrives and then dropped: a query's slot is freed
// only once its answer is applied, so at most parallel answers are held
// at a time; and apply folds and drops what it is handed, so the calls
// are Folded: a streaming querier hands them on a series at a time.
func fetchAll(ctx context.Context, q query.Querier, exprs []string, parallel int, recorded bool, start, end time.Time, apply func(figure, model.Value) error) error {
	calls := make([]query.Call, len(dearestFirst))
	for i, f := range dearestFirst {
		_, hourlyFigure := hourlyOf[f]
		rec, recordedFigure := recordedOf[f]
		switch {
		case recordedFigure && recorded:
			// The points of Exprs' window [w] offset 1ms at end: read where
			// the backend can as stored chunks (remote read), for which
			// Prometheus evaluates nothing and encodes no JSON.
			calls[i] = query.Stored(hourly.Record(rec), end.Sub(start)+time.Hour, end.Add(-time.Millisecond))
		case hourlyFigure:
			calls[i] = query.Ranged(exprs[f], query.Range{Start: start, End: end, Step: time.Hour}).Folded()
		default:
			calls[i] = query.Instant(exprs[f], end).Folded()
		}
	}
	return query.Fan(ctx, q, calls, parallel, func(i int, v model.Value) error { return apply(dearestFirst[i], v) })
}

// dearestFirst is every figure, in the order fetchAll starts their
// queries: the dearest first, so that the last ones to finish are cheap
// and a few queries in flight keep the server's cores busy to the end
// (the hourly p95 costs Prometheus about twice a mean or a maximum from
// raw series, for its sort; the allocation info is a series per
// allocation).
var dearestFirst = []figure{qHourP95, qHourMean, qHourPeak, qTotal, qHourMem, qHourCount, qInfo}

// holderInfo is what the info series say of a holder.
type holderInfo struct{ team, user, kind string }

// fold gathers the answers of one fetch into its items, holder by holder.
type fold struct {
	from      time.Time
	hours     int
	lag       time.Duration
	points    bool // the hourly figures are stored points, not range steps
	poolLabel string
	exprs     []string
	items     map[string]*Item      // host|device|job -> item
	infos     map[string]holderInfo // host|device|job -> info
}

// item returns the item of the series with labels m, made on first sight;
// nil for a series that names no GPU.
func (fd *fold) item(m model.Metric) *Item {
	id, ok := features.Identify(m)
	if !ok {
		return nil
	}
	key := id.Host + "|" + id.Device + "|" + id.Job
	it := fd.items[key]
	if it == nil {
		hours := fd.hours
		it = &Item{Host: id.Host, Device: id.Device, UUID: id.UUID, Model: id.Model, Job: id.Job}
		if fd.poolLabel != "" {
			it.poolLabel = string(m[model.LabelName(fd.poolLabel)])
		}
		it.HourMean, it.HourP95, it.HourPeak = nanSlice(hours), nanSlice(hours), nanSlice(hours)
		it.HourSamples, it.HourMemPeak = make([]float32, hours), nanSlice(hours)
		fd.items[key] = it
	}
	return it
}

// apply folds the answer v of figure f into the items.
func (fd *fold) apply(f figure, v model.Value) error {
	switch val := v.(type) {
	case model.Vector:
		fd.applyVector(f, val)
	case model.Matrix:
		fd.applyMatrix(f, val)
	default:
		return fmt.Errorf("%q returned %s", fd.exprs[f], v.Type())
	}
	return nil
}

// applyVector folds an instant figure: the holders' info, or a figure over
// the whole window.
func (fd *fold) applyVector(f figure, val model.Vector) {
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
			fd.infos[id.Host+"|"+id.Device+"|"+job] = holderInfo{team: string(s.Metric[schema.LabelTeam]),
				user: string(s.Metric[schema.LabelUser]), kind: strings.ToLower(string(s.Metric[schema.LabelKind]))}
			continue
		}
		it := fd.item(s.Metric)
		if it == nil {
			continue
		}
		setInstant(it, f, x, s.Metric)
	}
}

// applyMatrix folds an hourly figure into the items' hours.
func (fd *fold) applyMatrix(f figure, val model.Matrix) {
	for _, ss := range val {
		it := fd.item(ss.Metric)
		if it == nil {
			continue
		}
		scale := 1.0
		switch f {
		case qTotal:
			// The recorded totals of the window: the device's memory is
			// the highest.
			for _, p := range ss.Values {
				if x := float64(p.Value); !math.IsNaN(x) && !math.IsInf(x, 0) {
					it.TotalMiB = max(it.TotalMiB, x)
				}
			}
			continue
		case qHourMean, qHourP95, qHourPeak:
			scale = migScale(ss.Metric, it.Model)
			it.HasCompute = true
			it.TimeShare = ss.Metric[SourceLabel] != ""
		case qHourMem:
			it.HasMemory = true
		}
		for i, p := range ss.Values {
			h := fd.hour(p.Timestamp)
			if fd.points && i+1 < len(ss.Values) && fd.hour(ss.Values[i+1].Timestamp) == h {
				continue // the rule ran twice in the hour (a restart): the later point stands
			}
			x := float64(p.Value)
			if h < 0 || h >= fd.hours || math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			setHour(it, f, h, x, scale)
		}
	}
}

// hour is the index in the window of the hour a point at ts holds: a range
// step at H+lag holds [H-1h, H); a point a rule stored in [H, H+1h) holds
// [H-1h, H) too.
func (fd *fold) hour(ts model.Time) int {
	d := ts.Time().Sub(fd.from)
	if !fd.points {
		d -= fd.lag
	}
	if d < 0 {
		return -1
	}
	return int(d/time.Hour) - 1
}

// setHour sets hour h of figure f of it to x (a compute figure scaled to a
// whole GPU by scale).
func setHour(it *Item, f figure, h int, x, scale float64) {
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
		it.HourMemPeak[h] = float32(x)
		it.Memory.Peak = max(it.Memory.Peak, x)
	}
}

// result puts the items that were there into r, each in its pool and with
// its holder's info, in key order, with the devices' sample counts.
func (fd *fold) result(ctx context.Context, r *Result, po pools.Options) {
	hostSet := map[string]bool{}
	for _, it := range fd.items {
		hostSet[it.Host] = true
	}
	hosts := make([]string, 0, len(hostSet))
	for h := range hostSet {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	namer := pools.New(ctx, po, hosts)
	// A GPU's pool is named once, from the first of its holders that
	// carries the pool label, so that its holders stay together.
	gpuPool := map[string]string{}
	for _, it := range fd.items {
		if it.poolLabel != "" {
			gpuPool[it.Host+"|"+it.UUID] = it.poolLabel
		}
	}
	// In key order (an item's map key is its Key).
	keys := make([]string, 0, len(fd.items))
	for k, it := range fd.items {
		if it.Samples > 0 { // a holder without memory samples was not there
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	live := make([]*Item, len(keys))
	for i, k := range keys {
		live[i] = fd.items[k]
	}
	summariseAll(live)
	r.Items = slices.Grow(r.Items, len(live))
	for i, it := range live {
		it.Pool, _ = namer.Pool(it.Model, it.Host, gpuPool[it.Host+"|"+it.UUID])
		if in, ok := fd.infos[keys[i]]; ok {
			it.Team, it.User, it.Kind = in.team, in.user, in.kind
		}
		r.Items = append(r.Items, *it)
		d := it.Host + "|" + it.Device
		r.DeviceSamples[d] += it.Samples
	}
	r.PoolsBy = namer.Notes()
	r.Expected, r.HistoryHours = expected(live, r.Hours)
}

// expected is the sample count a device present all through the window's
// hours would have, and the hours from the first that holds a sample to
// the window's end. The data's resolution is the most samples one holder
// had in one hour (not a device's sum: a shared GPU's holders each have a
// series); times the hours asked for, coverage is against the window asked
// for, so ten minutes of data in a week's window is 0.1 % of it, not all
// of it.
func expected(items []*Item, hours int) (perWindow float64, history int) {
	first := hours
	var perHour float64
	for _, it := range items {
		for h, n := range it.HourSamples {
			if n > 0 && h < hours {
				perHour, first = max(perHour, float64(n)), min(first, h)
			}
		}
	}
	return perHour * float64(hours), hours - first
}

// coverage is what the probe found of the recording rules over a window.
type coverage struct {
	ok     bool // they cover it
	trim   bool // they cover all but its last hour, not stored yet
	reason string
}

// probe compares, at the window's first and last hours, the holders the
// recording rules stored with those the raw series have (one hour of raw
// samples each), and the last but one hour of the rules: a rule stores an
// hour within the hour after it, so the last hour of a window ending now
// may not be there yet.
func probe(ctx context.Context, q query.Querier, from, to time.Time) (coverage, error) {
	rec := "count(" + hourly.Recorded(hourly.Count) + ")"
	raw := "count(" + hourly.Raw(hourly.Count, Both) + ")"
	first, last := from.Add(time.Hour), to
	calls := []query.Call{query.Instant(rec, first.Add(hourly.Lag)), query.Instant(rec, last.Add(hourly.Lag)),
		query.Instant(rec, last.Add(hourly.Lag-time.Hour)), query.Instant(raw, first), query.Instant(raw, last)}
	got := make([]float64, len(calls))
	err := query.FanEach(ctx, q, calls, len(calls), func(i int, v model.Value) {
		if vec, ok := v.(model.Vector); ok && len(vec) == 1 {
			got[i] = float64(vec[0].Value)
		}
	})
	if err != nil {
		return coverage{}, fmt.Errorf("probe recording rules: %w", err)
	}
	recFirst, recLast, recPrev, rawFirst, rawLast := got[0], got[1], got[2], got[3], got[4]
	name := hourly.Record(hourly.Count)
	hourOf := func(t time.Time) string { return t.Add(-time.Hour).UTC().Format("2006-01-02 15:04") }
	switch {
	case recFirst == 0 && recLast == 0 && recPrev == 0:
		return coverage{reason: fmt.Sprintf("no recorded series %s in the window: the planner's recording rules (group %s) are not loaded, or did not run then", name, hourly.Group)}, nil
	case recFirst < rawFirst:
		return coverage{reason: fmt.Sprintf("the recording rules stored %.0f of %.0f holders for the window's first hour (%s UTC): they started later", recFirst, rawFirst, hourOf(first))}, nil
	case recLast >= rawLast:
		return coverage{ok: true, reason: "recorded figures cover the window"}, nil
	case recPrev > 0:
		return coverage{trim: true, reason: fmt.Sprintf("the recording rules have not stored the window's last hour (%s UTC) yet: the plan ends an hour earlier", hourOf(last))}, nil
	}
	return coverage{reason: fmt.Sprintf("the recording rules stored %.0f of %.0f holders for the window's last hour (%s UTC): they stopped earlier", recLast, rawLast, hourOf(last))}, nil
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
	for _, x := range it.HourMemPeak {
		if !math.IsNaN(float64(x)) {
			mem = append(mem, float64(x))
		}
	}
	if len(mem) > 0 {
		sort.Float64s(mem)
		it.Memory.P50, it.Memory.P95 = rank(mem, 0.5), rank(mem, 0.95)
	}
}

// summariseAll summarises the items on every core: each item's summary
// is its own, and a fleet's is most of the planner's work after the reads.
func summariseAll(its []*Item) {
	parts := min(runtime.GOMAXPROCS(0), len(its))
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			for _, it := range its[p*len(its)/parts : (p+1)*len(its)/parts] {
				it.summarise()
			}
		})
	}
	wg.Wait()
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

func nanSlice(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}
