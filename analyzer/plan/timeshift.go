package plan

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/forecast"
)

// HeatMap is a pool's idle capacity by hour of week: the mean number of
// GPUs that were allocated but idle, and unallocated, in each hour of the
// week (index 0 = Monday 00:00), over the weeks of the window. Hours the
// window did not cover are NaN in JSON-less use and -1 in JSON.
type HeatMap struct {
	GPUs        int       `json:"gpus"`
	Idle        []float64 `json:"allocated_idle"`
	Unallocated []float64 `json:"unallocated"`
	// Allocated is the mean number of allocated GPUs (the pool's demand).
	Allocated []float64 `json:"allocated"`
	// Windows are the daily batch windows: hours of the day when, on
	// average, the pool's spare share (idle or unallocated) is at least
	// WindowShare and in the upper half of its daily range.
	Windows []Window `json:"batch_windows"`
}

// Window is a recurring daily span of spare capacity.
type Window struct {
	// From and To are hours of the day, To exclusive; To may pass 24
	// when the window runs past midnight.
	From  int     `json:"from_hour"`
	To    int     `json:"to_hour"`
	Share float64 `json:"share"` // mean share of the pool idle or unallocated
	GPUs  float64 `json:"gpus"`
}

// String reads like "22:00–07:00: 40 % idle".
func (w Window) String() string {
	if w.To-w.From >= 24 {
		return fmt.Sprintf("all day: %.0f %% idle (%.1f GPUs)", 100*w.Share, w.GPUs)
	}
	return fmt.Sprintf("%02d:00–%02d:00: %.0f %% idle (%.1f GPUs)", w.From, w.To%24, 100*w.Share, w.GPUs)
}

// WindowShare is the least spare share a batch window reports.
const WindowShare = 0.3

// deviceHours tallies, per GPU and hour, allocation and activity.
func (o *Options) heat(items []*demand.Item, res *demand.Result) *HeatMap {
	type state struct{ alloc, active, seen bool }
	per := map[string][]state{}
	for _, it := range items {
		k := gpuKey(it)
		s := per[k]
		if s == nil {
			s = make([]state, res.Hours)
			per[k] = s
		}
		for h := 0; h < res.Hours; h++ {
			if !it.Present(h) {
				continue
			}
			s[h].seen = true
			if it.Job == "" {
				continue
			}
			s[h].alloc = true
			x := float64(it.HourP95[h])
			if math.IsNaN(x) || x > o.IdleCompute {
				// No compute reading is not idleness.
				s[h].active = true
			}
		}
	}
	hm := &HeatMap{GPUs: len(per), Idle: make([]float64, HoursOfWeek), Unallocated: make([]float64, HoursOfWeek),
		Allocated: make([]float64, HoursOfWeek)}
	n := make([]float64, HoursOfWeek)
	for h := 0; h < res.Hours; h++ {
		w := HourOfWeek(res.From.Add(time.Duration(h)*time.Hour), o.Location)
		n[w]++
		for _, s := range per {
			switch {
			case s[h].alloc && !s[h].active:
				hm.Idle[w]++
				hm.Allocated[w]++
			case s[h].alloc:
				hm.Allocated[w]++
			case s[h].seen:
				hm.Unallocated[w]++
			}
		}
	}
	for w := range n {
		if n[w] == 0 {
			hm.Idle[w], hm.Unallocated[w], hm.Allocated[w] = -1, -1, -1
			continue
		}
		hm.Idle[w] /= n[w]
		hm.Unallocated[w] /= n[w]
		hm.Allocated[w] /= n[w]
	}
	hm.Windows = windows(hm)
	return hm
}

// windows finds the daily spans (on average over the days of the week)
// when at least WindowShare of the pool is spare.
func windows(hm *HeatMap) []Window {
	if hm.GPUs == 0 {
		return nil
	}
	var spare [24]float64
	var cnt [24]float64
	for w := 0; w < HoursOfWeek; w++ {
		if hm.Idle[w] < 0 {
			continue
		}
		spare[w%24] += hm.Idle[w] + hm.Unallocated[w]
		cnt[w%24]++
	}
	var share [24]float64
	lo, hi := 1.0, 0.0
	for h := range share {
		if cnt[h] > 0 {
			share[h] = spare[h] / cnt[h] / float64(hm.GPUs)
			lo, hi = min(lo, share[h]), max(hi, share[h])
		}
	}
	// A window is where the spare share is high for this pool: at least
	// WindowShare, and in the upper half of the day's range, so that a
	// pool with spare capacity all day still shows its best hours.
	threshold := max(WindowShare, (lo+hi)/2)
	ok := [24]bool{}
	all := true
	for h := range share {
		ok[h] = cnt[h] > 0 && share[h] >= threshold
		all = all && ok[h]
	}
	if all {
		return []Window{mk(0, 24, share[:], hm.GPUs)}
	}
	// Walk the day from an hour that is not spare, so that a span that
	// wraps past midnight is found whole.
	start := 0
	for ok[start] {
		start++
	}
	var out []Window
	run := -1
	for i := 1; i <= 24; i++ {
		h := start + i
		switch {
		case ok[h%24] && run < 0:
			run = h
		case !ok[h%24] && run >= 0:
			out = append(out, mk(run, h, share[:], hm.GPUs))
			run = -1
		}
	}
	return out
}

func mk(from, to int, share []float64, gpus int) Window {
	var s float64
	for h := from; h < to; h++ {
		s += share[h%24]
	}
	m := s / float64(to-from)
	return Window{From: from % 24, To: from%24 + to - from, Share: m, GPUs: m * float64(gpus)}
}

// Forecast is a pool's compute demand a week ahead, by hour, with its
// allocations beside it: a fleet whose allocations are flat can still have
// its demand peak every Monday morning.
type Forecast struct {
	// Measure is what demand counts, in GPU-equivalents: the holders' SM
	// activity ("sm_active"), or their GPU util where the data has no
	// profiling fields ("util", which counts a GPU busy whatever share of
	// its SMs a kernel used).
	Measure string `json:"measure"`
	// Method is seasonal_naive (next week is this week) or holt_winters:
	// seasonal naive from one or two weeks of history; from three or more,
	// whichever erred less in the backtest.
	Method string `json:"method"`
	// Weeks is how many whole weeks of history the forecast stands on.
	Weeks    int                `json:"weeks"`
	Backtest *forecast.Backtest `json:"backtest,omitempty"`
	// NaiveMAPE is seasonal naive's error forecasting the last week from
	// the one before, when two weeks are all there is (no backtest of
	// Holt-Winters fits in them).
	NaiveMAPE float64 `json:"seasonal_naive_mape,omitempty"`
	// Next is the demand per hour of the week after the window, from its
	// end (NextFrom); NextAllocated the allocated GPUs, seasonal naive.
	NextFrom      time.Time `json:"next_from"`
	Next          []float64 `json:"next"`
	NextAllocated []float64 `json:"next_allocated"`
	// ByHourOfWeek is Next reordered by hour of week (0 = Monday 00:00).
	ByHourOfWeek []float64 `json:"next_by_hour_of_week"`
	// WeekdayLevel is the median forecast demand of the working hours
	// (09:00-17:00) of Monday to Friday: what a peak is measured against.
	WeekdayLevel float64 `json:"weekday_level"`
	// Reserve names the peak spans of the coming week.
	Reserve []Reservation `json:"reserve"`
	// Memory is the framebuffer the pool's holders use at once, forecast
	// on its own (its method chosen by its own backtest).
	Memory *MemoryForecast `json:"memory,omitempty"`
}

// MemoryForecast predicts the pool's memory demand: per hour, the sum of
// its holders' highest framebuffer used, in GiB. A pool sized by compute
// alone can still run out of memory at the hours this names.
type MemoryForecast struct {
	Method    string             `json:"method"`
	Backtest  *forecast.Backtest `json:"backtest,omitempty"`
	NaiveMAPE float64            `json:"seasonal_naive_mape,omitempty"`
	// Next is GiB per hour of the week after the window, from the
	// forecast's NextFrom.
	Next []float64 `json:"next_gib"`
	// WeekdayLevel is the median of Next over the working hours of Monday
	// to Friday.
	WeekdayLevel float64      `json:"weekday_level_gib"`
	Peaks        []MemoryPeak `json:"peaks"`
}

// MemoryPeak names a span of forecast memory demand within 10 % of the
// week's highest.
type MemoryPeak struct {
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	GiB     float64   `json:"gib"`
	OfLevel float64   `json:"of_weekday_level"`
}

// String reads like "Monday 09:00–12:00: 547 GiB, 1.8× the weekday level".
func (p MemoryPeak) String() string {
	level := ""
	if p.OfLevel > 0 {
		level = fmt.Sprintf(", %.1f× the weekday level", p.OfLevel)
	}
	return fmt.Sprintf("%s: %.0f GiB%s", spanName(p.From, p.To), p.GiB, level)
}

// Reservation names a forecast peak of demand.
type Reservation struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// GPUEquivalents is the span's highest hourly demand, OfLevel its ratio
	// to the weekday level (0 when that level is 0).
	GPUEquivalents float64 `json:"gpu_equivalents"`
	OfLevel        float64 `json:"of_weekday_level"`
	// GPUs is the most GPUs the forecast expects allocated in the span.
	GPUs int `json:"gpus"`
}

// String reads like "Monday 09:00–12:00: 78 GPU-equivalents, 1.2× the
// weekday level (96 GPUs allocated)".
func (r Reservation) String() string {
	span := spanName(r.From, r.To)
	level := ""
	if r.OfLevel > 0 {
		level = fmt.Sprintf(", %.1f× the weekday level", r.OfLevel)
	}
	size := fmt.Sprintf("%.0f", r.GPUEquivalents)
	if r.GPUEquivalents < 10 {
		size = fmt.Sprintf("%.1f", r.GPUEquivalents)
	}
	return fmt.Sprintf("%s: %s GPU-equivalents%s (%d GPUs allocated)", span, size, level, r.GPUs)
}

// spanName reads like "Monday 09:00–12:00", naming the second day when
// the span ends on another.
func spanName(from, to time.Time) string {
	name := from.Weekday().String() + " " + from.Format("15:04") + "–"
	if end := to.Add(-time.Minute); end.YearDay() != from.YearDay() {
		name += to.Weekday().String() + " "
	}
	return name + to.Format("15:04")
}

// forecast predicts the pool's hourly compute and memory demand for the
// week after the window, when the window's data reaches back at least one
// week (a week's window that holds a day of data has no season to repeat).
func (o *Options) forecast(items []*demand.Item, res *demand.Result) *Forecast {
	season := HoursOfWeek
	if res.HistoryHours < season {
		return nil
	}
	y, measure := DemandSeries(items, res.Hours)
	pr, ok := predict(y, season)
	if !ok {
		return nil
	}
	f := &Forecast{Measure: measure, Method: pr.method, Weeks: res.Hours / season, NextFrom: res.To,
		Backtest: pr.backtest, NaiveMAPE: pr.naiveMAPE, Next: pr.next}
	f.NextAllocated = forecast.SeasonalNaive(AllocatedSeries(items, res.Hours), season, season)
	f.ByHourOfWeek = make([]float64, HoursOfWeek)
	for k, x := range f.Next {
		f.ByHourOfWeek[HourOfWeek(res.To.Add(time.Duration(k)*time.Hour), o.Location)] = x
	}
	f.WeekdayLevel = weekdayLevel(f.Next, res.To, o.Location)
	f.Reserve = reservations(f.Next, f.NextAllocated, f.WeekdayLevel, res.To, o.Location)
	if mem, ok := predict(MemorySeries(items, res.Hours), season); ok {
		m := &MemoryForecast{Method: mem.method, Backtest: mem.backtest, NaiveMAPE: mem.naiveMAPE, Next: mem.next}
		m.WeekdayLevel = weekdayLevel(m.Next, res.To, o.Location)
		for _, sp := range peakSpans(m.Next, 1) {
			p := MemoryPeak{From: res.To.Add(time.Duration(sp.from) * time.Hour).In(o.Location),
				To: res.To.Add(time.Duration(sp.to) * time.Hour).In(o.Location), GiB: sp.peak}
			if m.WeekdayLevel > 0 {
				p.OfLevel = p.GiB / m.WeekdayLevel
			}
			m.Peaks = append(m.Peaks, p)
		}
		f.Memory = m
	}
	return f
}

// prediction is a forecast of one hourly series and how it was chosen.
type prediction struct {
	next      []float64
	method    string
	backtest  *forecast.Backtest
	naiveMAPE float64
}

// predict forecasts the season after y: seasonal naive from one or two
// seasons of history (with naive's own error when there are two), and
// from three or more whichever of it and Holt-Winters erred less in the
// backtest; false when the fit fails.
func predict(y []float64, season int) (prediction, bool) {
	pr := prediction{method: "seasonal_naive"}
	switch bt, err := forecast.Evaluate(y, season, 2); {
	case err == nil:
		pr.backtest = &bt
		if bt.HoltWinters < bt.Naive {
			pr.method = "holt_winters"
		}
	case len(y)/season == 2:
		end := len(y) - len(y)%season
		if m := forecast.MAPE(y[end-season:end], y[end-2*season:end-season]); !math.IsNaN(m) {
			pr.naiveMAPE = m
		}
	}
	pr.next = forecast.SeasonalNaive(y, season, season)
	if pr.method == "holt_winters" {
		m, err := forecast.Fit(y, season)
		if err != nil {
			return pr, false
		}
		pr.next = m.Forecast(season)
	}
	return pr, true
}

// weekdayLevel is the median of next (hourly, from `from`) over the
// working hours (09:00-17:00) of Monday to Friday in loc.
func weekdayLevel(next []float64, from time.Time, loc *time.Location) float64 {
	var working []float64
	for k, x := range next {
		at := from.Add(time.Duration(k) * time.Hour).In(loc)
		if wd := at.Weekday(); wd >= time.Monday && wd <= time.Friday && at.Hour() >= 9 && at.Hour() < 17 {
			working = append(working, x)
		}
	}
	return median(working)
}

// MemorySeries sums the holders' hourly framebuffer peaks per hour of the
// window, in GiB: the memory a pool must hold at once, hour by hour.
func MemorySeries(items []*demand.Item, hours int) []float64 {
	y := make([]float64, hours)
	for _, it := range items {
		if it.Job == "" {
			continue
		}
		for h := 0; h < hours && h < len(it.HourMemPeak); h++ {
			if x := float64(it.HourMemPeak[h]); !math.IsNaN(x) {
				y[h] += x / 1024
			}
		}
	}
	return y
}

// DemandSeries sums the holders' compute per hour of the window, in
// GPU-equivalents, and names the measure: SM activity, or util when any
// holder had only util.
func DemandSeries(items []*demand.Item, hours int) ([]float64, string) {
	y := make([]float64, hours)
	measure := "sm_active"
	for _, it := range items {
		if it.Job == "" {
			continue
		}
		if it.TimeShare {
			measure = "util"
		}
		for h := 0; h < hours && h < len(it.HourMean); h++ {
			if x := float64(it.HourMean[h]); !math.IsNaN(x) {
				y[h] += x
			}
		}
	}
	return y, measure
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// AllocatedSeries counts the GPUs allocated in each hour of the window.
func AllocatedSeries(items []*demand.Item, hours int) []float64 {
	per := map[string][]bool{}
	for _, it := range items {
		if it.Job == "" {
			continue
		}
		k := gpuKey(it)
		if per[k] == nil {
			per[k] = make([]bool, hours)
		}
		for h := 0; h < hours; h++ {
			per[k][h] = per[k][h] || it.Present(h)
		}
	}
	y := make([]float64, hours)
	for _, s := range per {
		for h, a := range s {
			if a {
				y[h]++
			}
		}
	}
	return y
}

// reservations names up to three spans of the coming week whose forecast
// demand is within 10 % of its peak, highest first.
func reservations(next, alloc []float64, level float64, from time.Time, loc *time.Location) []Reservation {
	var out []Reservation
	for _, sp := range peakSpans(next, 0.5) {
		r := Reservation{From: from.Add(time.Duration(sp.from) * time.Hour).In(loc),
			To: from.Add(time.Duration(sp.to) * time.Hour).In(loc), GPUEquivalents: sp.peak}
		for h := sp.from; h < sp.to && h < len(alloc); h++ {
			r.GPUs = max(r.GPUs, int(math.Ceil(alloc[h]-1e-9)))
		}
		if level > 0 {
			r.OfLevel = r.GPUEquivalents / level
		}
		out = append(out, r)
	}
	return out
}

// span is the hours [from, to) of a forecast and its highest value.
type span struct {
	from, to int
	peak     float64
}

// peakSpans returns up to three runs of hours of next within 10 % of its
// highest value, highest first; none when that value is under floor (a
// forecast of nothing names no peak).
func peakSpans(next []float64, floor float64) []span {
	top := 0.0
	for _, x := range next {
		top = max(top, x)
	}
	if top < floor {
		return nil
	}
	var out []span
	for h := 0; h < len(next); {
		if next[h] < 0.9*top {
			h++
			continue
		}
		sp := span{from: h, to: h}
		for sp.to < len(next) && next[sp.to] >= 0.9*top {
			sp.peak = max(sp.peak, next[sp.to])
			sp.to++
		}
		out = append(out, sp)
		h = sp.to
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].peak > out[j].peak })
	if len(out) > 3 {
		out = out[:3]
	}
	return out
}
