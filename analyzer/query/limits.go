package query

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/common/model"
)

// The flags that set Limits: errors past a cap name them, and cmd
// registers them under these names.
const (
	FlagAnswerSeries  = "query.answer.max-series"
	FlagAnswerSamples = "query.answer.max-samples"
	FlagAnswerBytes   = "query.answer.max-bytes"
	FlagCycleSeries   = "query.cycle.max-series"
	FlagCycleSamples  = "query.cycle.max-samples"
	FlagCycleBytes    = "query.cycle.max-bytes"
)

// The defaults of Limits, sized for a fleet of 100,000 GPUs. The largest
// answer the analyzer asks for is the planner's week of one hourly figure
// from raw series: a series per allocation of a GPU (a job a GPU a day, as
// the scale tests' fleet, is 700,000 series) and a point per hour held
// (100,000 GPUs × 168 hours, twice for the hour in which a GPU changes
// holder: 33.6 million samples). The daemon's step answers hold a series
// per GPU or MIG instance (100,000; 700,000 with every GPU cut in seven),
// `analyze` a day of 5-minute steps per GPU (28.8 million samples). A
// cycle is the planner's seven figures (five hourly ones of 33.6 million
// samples, the device totals of 16.8 million, the allocations' info of
// 700,000: 186 million samples, 4.9 million series) or the daemon's
// sixteen step answers (1.6 million series).
//
// Decoded bytes count what is held, not what was read: a series the
// caller folds as it arrives (the planner's, remote read's) is counted
// until it is folded, a whole answer until its cycle ends. A steady daemon
// cycle at 100,000 GPUs on dcgm-exporter's default fields holds about ten
// answers of a series per GPU: the first of each label set about 1.1 KB
// (its label map of ten labels, its strings and its key in Cycle's table:
// 108 MB), each later one 72 bytes (a SampleStream, its slot and one
// sample, sharing the first's labels: 65 MB), 173 MB (165 MiB) in all. The
// profiling fields (four more answers) take it to about 200 MB: raise
// --query.cycle.max-bytes for those fleets, as for `analyze` through
// Prometheus over more than about 2,500 GPUs (it holds a day of steps at
// a time: 16 answers of 288 samples, about 75 KB, per GPU). The bytes cap is
// what bounds the process' memory against a hostile server: the Go
// collector lets the heap grow to about twice what is live, so 192 MiB of
// answers keeps a process under 512 MiB (TestHostilePrometheusBounded in
// cmd/gpuwatch measures it).
const (
	DefaultAnswerSeries  = 1_000_000
	DefaultAnswerSamples = 50_000_000
	DefaultAnswerBytes   = 192 << 20
	DefaultCycleSeries   = 10_000_000 // 4.9 million with headroom
	DefaultCycleSamples  = 250_000_000
	DefaultCycleBytes    = 192 << 20
)

// Limits cap the answers of a Querier while they are decoded: per answer
// and per cycle (the queries of one fan-out, see Cycle), in series,
// samples and decoded bytes held. Zero takes the default; a negative
// value lifts the cap.
type Limits struct {
	AnswerSeries, AnswerSamples, AnswerBytes int64
	CycleSeries, CycleSamples, CycleBytes    int64
}

// DefaultLimits are the defaults, each spelled out.
func DefaultLimits() Limits {
	return Limits{}.WithDefaults()
}

// WithDefaults fills the zero fields of l with the defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.AnswerSeries, DefaultAnswerSeries)
	def(&l.AnswerSamples, DefaultAnswerSamples)
	def(&l.AnswerBytes, DefaultAnswerBytes)
	def(&l.CycleSeries, DefaultCycleSeries)
	def(&l.CycleSamples, DefaultCycleSamples)
	def(&l.CycleBytes, DefaultCycleBytes)
	return l
}

// CapError is an answer cut off at a cap: it names the flag that sets it,
// so that the one line an operator reads says what to narrow or raise.
type CapError struct {
	What  string // "series", "samples" or "decoded bytes"
	Scope string // "answer" or "cycle"
	Limit int64
	Flag  string
}

func (e *CapError) Error() string {
	in := "the answer holds"
	if e.Scope == "cycle" {
		in = "the cycle's answers hold"
	}
	return fmt.Sprintf("%s more than %d %s (--%s): narrow the query or the window, or raise --%s", in, e.Limit, e.What, e.Flag, e.Flag)
}

// Cycle is what the queries of one fan-out share: counters of the series,
// samples and decoded bytes their answers hold, and the label sets
// already decoded, which later answers of the same series reuse (the
// daemon's sixteen step answers name the same series sixteen times).
// Safe for concurrent use.
type Cycle struct {
	series, samples, bytes atomic.Int64

	mu     sync.Mutex
	labels map[string]model.Metric
}

type cycleKey struct{}

// WithCycle returns ctx carrying a new Cycle, unless it carries one
// already (a fan-out inside another shares the outer cycle), and the cycle.
func WithCycle(ctx context.Context) (context.Context, *Cycle) {
	if c := CycleFrom(ctx); c != nil {
		return ctx, c
	}
	c := &Cycle{}
	return context.WithValue(ctx, cycleKey{}, c), c
}

// CycleFrom returns the cycle ctx carries, or nil.
func CycleFrom(ctx context.Context) *Cycle {
	c, _ := ctx.Value(cycleKey{}).(*Cycle)
	return c
}

// Held returns the decoded bytes the cycle's answers hold now.
func (c *Cycle) Held() int64 { return c.bytes.Load() }

// Metric returns the label set that key (the labels as decoded, in their
// order) names, built by build the first time and shared afterwards, and
// the bytes that building it cost (zero when it was shared). Callers
// never change a Metric they are handed, so one map may serve every
// answer of a cycle.
func (c *Cycle) Metric(key []byte, build func() (model.Metric, int64)) (model.Metric, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.labels[string(key)]; ok {
		return m, 0
	}
	m, cost := build()
	if c.labels == nil {
		c.labels = map[string]model.Metric{}
	}
	c.labels[string(key)] = m
	return m, cost + int64(len(key)) + internEntryBytes
}

// internEntryBytes is what an entry of Cycle's label table costs besides
// its key: the table's slot (a string and a map header) and its share of
// the table's growth.
const internEntryBytes = 64

// Tally counts one answer against its Limits and its cycle. Not safe for
// concurrent use: one answer is decoded by one goroutine.
type Tally struct {
	lim                    Limits
	cycle                  *Cycle
	series, samples, bytes int64
}

// NewTally starts the count of one answer under l (defaults filled) in
// the cycle ctx carries; without one the answer is its own cycle.
func NewTally(ctx context.Context, l Limits) *Tally {
	c := CycleFrom(ctx)
	if c == nil {
		c = &Cycle{}
	}
	return &Tally{lim: l.WithDefaults(), cycle: c}
}

// Cycle returns the cycle the answer is counted in.
func (t *Tally) Cycle() *Cycle { return t.cycle }

// Series counts n more series.
func (t *Tally) Series(n int64) error {
	t.series += n
	return check(t.series, t.cycle.series.Add(n), "series", t.lim.AnswerSeries, FlagAnswerSeries, t.lim.CycleSeries, FlagCycleSeries)
}

// Samples counts n more samples.
func (t *Tally) Samples(n int64) error {
	t.samples += n
	return check(t.samples, t.cycle.samples.Add(n), "samples", t.lim.AnswerSamples, FlagAnswerSamples, t.lim.CycleSamples, FlagCycleSamples)
}

// Hold counts n more decoded bytes held; call it before allocating them.
func (t *Tally) Hold(n int64) error {
	t.bytes += n
	return check(t.bytes, t.cycle.bytes.Add(n), "decoded bytes", t.lim.AnswerBytes, FlagAnswerBytes, t.lim.CycleBytes, FlagCycleBytes)
}

// Release gives back n bytes held: a part of the answer the caller has
// folded and dropped.
func (t *Tally) Release(n int64) {
	t.bytes -= n
	t.cycle.bytes.Add(-n)
}

// Done releases what the answer still holds from its cycle's bytes: for an
// answer cut off by an error, or one whose parts were all handed on.
func (t *Tally) Done() { t.Release(t.bytes) }

// Left returns how many more bytes the answer may hold now, under both
// its cap and its cycle's.
func (t *Tally) Left() int64 {
	left := int64(1<<63 - 1)
	if t.lim.AnswerBytes > 0 {
		left = t.lim.AnswerBytes - t.bytes
	}
	if t.lim.CycleBytes > 0 {
		left = min(left, t.lim.CycleBytes-t.cycle.bytes.Load())
	}
	return max(left, 0)
}

func check(answer, cycle int64, what string, answerCap int64, answerFlag string, cycleCap int64, cycleFlag string) error {
	switch {
	case answerCap > 0 && answer > answerCap:
		return &CapError{What: what, Scope: "answer", Limit: answerCap, Flag: answerFlag}
	case cycleCap > 0 && cycle > cycleCap:
		return &CapError{What: what, Scope: "cycle", Limit: cycleCap, Flag: cycleFlag}
	}
	return nil
}

// Decoded-size estimates of the model types, from Go's layouts (amd64):
// what decoding a series or a sample allocates and the answer then holds.
const (
	// SampleStreamBytes is a *model.SampleStream and its slot in a Matrix.
	SampleStreamBytes = 48 + 8
	// SampleBytes is a *model.Sample (in a Vector) and its slot.
	SampleBytes = 32 + 8
	// PairBytes is one model.SamplePair.
	PairBytes = 16
)

// MetricBytes estimates what a model.Metric of n labels whose names and
// values total text bytes holds: the map (a header, and a group of eight
// 32-byte slots and their control word per seven labels) and the strings
// (each rounded up to the allocator's 8 bytes).
func MetricBytes(n int, text int64) int64 {
	groups := int64(n+6) / 7
	return 48 + groups*(8+8*32) + text + int64(2*n)*8
}
