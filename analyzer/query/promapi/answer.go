package promapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	jsoniter "github.com/json-iterator/go"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// MaxAnswerBytes bounds the bytes read of one answer's body, whatever it
// decodes to: a server that streams without end (whitespace, or one
// endless string) is cut off here. What an answer may hold once decoded
// is bounded by query.Limits, checked as it is decoded.
const MaxAnswerBytes = 2 << 30

// answer is what one query returned, decoded from the body as it is read.
//
// client_golang's api/prometheus/v1 reads the whole body into memory, scans
// it twice with encoding/json (validating it, then capturing "data" as raw
// bytes) and decodes it a third time with json-iterator: for the planner's
// week of hourly figures that was three times the cost of deciding the plan
// (measured with pprof on a 2,000-GPU week). One streaming pass with
// json-iterator reads the same format (the Prometheus HTTP API's, which
// Thanos, Mimir and VictoriaMetrics also serve) into the same model types.
type answer struct {
	status    string
	errorType string
	error     string
	// warnings counts the server's warnings; firstWarning is the first,
	// cut to a line: a server may send millions, and one log line with
	// their count says as much as millions of lines.
	warnings     int
	firstWarning string
	value        model.Value
	sets         []model.LabelSet // a series listing's
}

// decoder reads one answer, counting what it holds against a tally as it
// goes: each label, series and sample is counted before it is kept, so
// that an answer past a cap stops where it crossed it, not once it is
// whole.
type decoder struct {
	t *query.Tally
	// each, when set, takes the answer a part at a time (a series of a
	// matrix, a sample of a vector) as each is decoded, and the part's
	// bytes are released once it returns; nil keeps the answer whole, its
	// label sets shared within the cycle.
	each func(model.Value) error
	// body is the body as read: it fails a read once more bytes have been
	// read since the last part was counted than the tally has left, which
	// bounds what json-iterator buffers for one token (a string, a number,
	// a value it skips) before it is counted.
	body *counted
	err  error // the first cap or each error: it ends the decoding
	key  []byte
	lbls []string
}

// counted reads the body, bounding the whole (n) and the bytes read since
// the last part was counted (pending) by what the tally has left.
type counted struct {
	r       io.Reader
	n       int64
	over    bool
	pending int64
	t       *query.Tally
	err     error
}

func (c *counted) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.over = true
		return 0, io.ErrUnexpectedEOF
	}
	if c.t != nil && c.pending > c.t.Left() {
		// Held for a moment to name the cap it crosses.
		err := c.t.Hold(c.pending)
		c.t.Release(c.pending)
		if err != nil {
			c.err = err
			return 0, err
		}
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	c.pending += int64(n)
	return n, err
}

// fail records the first error and stops the iterator.
func (d *decoder) fail(it *jsoniter.Iterator, err error) {
	if d.err == nil {
		d.err = err
	}
	it.ReportError("decode", err.Error())
}

// hold counts n bytes held, stopping the iterator past a cap.
func (d *decoder) hold(it *jsoniter.Iterator, n int64) bool {
	if err := d.t.Hold(n); err != nil {
		d.fail(it, err)
		return false
	}
	return true
}

// decodeAnswer reads a query API answer from r, counting it against t; with
// each set the result is handed on a part at a time and not kept.
func decodeAnswer(r *counted, t *query.Tally, each func(model.Value) error) (*answer, error) {
	r.t = t
	d := &decoder{t: t, each: each, body: r}
	it := jsoniter.Parse(jsoniter.ConfigDefault, r, 64<<10)
	a := &answer{}
	var resultType string
	var pending []byte // a result that came before its resultType
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "status":
			a.status = it.ReadString()
		case "errorType":
			a.errorType = it.ReadString()
		case "error":
			a.error = oneLine(it.ReadString())
		case "warnings":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				if w := it.ReadString(); a.warnings == 0 {
					a.firstWarning = oneLine(w)
				}
				a.warnings++
				r.pending = 0 // read and dropped
				return true
			})
		case "data":
			switch it.WhatIsNext() {
			case jsoniter.NilValue:
				it.Skip()
				return true
			case jsoniter.ArrayValue: // a series listing's label sets
				a.sets = d.readSets(it)
				return it.Error == nil
			}
			it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
				switch key {
				case "resultType":
					resultType = it.ReadString()
				case "result":
					if resultType == "" {
						// Held as read until the type comes: counted.
						pending = append([]byte(nil), it.SkipAndReturnBytes()...)
						if !d.hold(it, int64(cap(pending))) {
							return false
						}
						r.pending = 0
						return true
					}
					a.value = d.readResult(it, resultType)
				default:
					it.Skip()
				}
				return it.Error == nil
			})
		default:
			it.Skip() // "infos" too: notes, not a doubt about the answer
		}
		r.pending = 0
		return it.Error == nil
	})
	if err := d.error(it); err != nil {
		return nil, err
	}
	if pending != nil {
		pit := jsoniter.ParseBytes(jsoniter.ConfigDefault, pending)
		d.body = nil
		a.value = d.readResult(pit, resultType)
		d.t.Release(int64(cap(pending)))
		if err := d.error(pit); err != nil {
			return nil, err
		}
	}
	if a.status == "" {
		return nil, errors.New("decode answer: no status: not the Prometheus API's JSON")
	}
	return a, nil
}

// error is the decoding's error: a cap or each's error as it is, a
// malformed answer wrapped.
func (d *decoder) error(it *jsoniter.Iterator) error {
	switch {
	case d.err != nil:
		return d.err
	case d.body != nil && d.body.err != nil:
		return d.body.err
	case it.Error != nil && !errors.Is(it.Error, io.EOF):
		return fmt.Errorf("decode answer: %w", it.Error)
	}
	return nil
}

// part hands one part on (streamed) and releases its bytes, or keeps it.
func (d *decoder) part(it *jsoniter.Iterator, v model.Value, cost int64) bool {
	if d.body != nil {
		d.body.pending = 0
	}
	if d.each == nil {
		return true
	}
	err := d.each(v)
	d.t.Release(cost)
	if err != nil {
		d.fail(it, err)
		return false
	}
	return true
}

// readResult reads the result of a resultType.
func (d *decoder) readResult(it *jsoniter.Iterator, resultType string) model.Value {
	switch resultType {
	case "matrix":
		m := model.Matrix{}
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			ss, cost := d.readSeries(it)
			if ss == nil {
				return false
			}
			if d.each != nil {
				return d.part(it, model.Matrix{ss}, cost)
			}
			m = append(m, ss)
			return d.part(it, nil, 0)
		})
		return m
	case "vector":
		v := model.Vector{}
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			s, cost := d.readSample(it)
			if s == nil {
				return false
			}
			if d.each != nil {
				return d.part(it, model.Vector{s}, cost)
			}
			v = append(v, s)
			return d.part(it, nil, 0)
		})
		return v
	case "scalar":
		t, x := readPoint(it)
		return &model.Scalar{Timestamp: t, Value: x}
	case "string":
		s := &model.String{}
		i := 0
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			if i == 0 {
				s.Timestamp = readTime(it)
			} else {
				s.Value = it.ReadString()
			}
			i++
			return true
		})
		return s
	}
	it.ReportError("result", fmt.Sprintf("unknown result type %q", oneLine(resultType)))
	return nil
}

// readSets reads the label sets of a series listing.
func (d *decoder) readSets(it *jsoniter.Iterator) []model.LabelSet {
	var sets []model.LabelSet
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		if err := d.t.Series(1); err != nil {
			d.fail(it, err)
			return false
		}
		m, _ := d.readMetric(it)
		if m == nil {
			return false
		}
		sets = append(sets, model.LabelSet(m))
		return d.part(it, nil, 0)
	})
	return sets
}

// readSeries reads one series of a matrix and returns it and the bytes it
// holds; nil past a cap or on a malformed series.
func (d *decoder) readSeries(it *jsoniter.Iterator) (*model.SampleStream, int64) {
	if err := d.t.Series(1); err != nil {
		d.fail(it, err)
		return nil, 0
	}
	ss := &model.SampleStream{}
	cost := int64(query.SampleStreamBytes)
	if !d.hold(it, cost) {
		return nil, 0
	}
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "metric":
			var c int64
			ss.Metric, c = d.readMetric(it)
			cost += c
		case "values":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				t, v := readPoint(it)
				if err := d.t.Samples(1); err != nil {
					d.fail(it, err)
					return false
				}
				if len(ss.Values) == cap(ss.Values) {
					old := cap(ss.Values)
					ss.Values = append(ss.Values, model.SamplePair{Timestamp: t, Value: v})
					grown := int64(cap(ss.Values)-old) * query.PairBytes
					cost += grown
					return d.hold(it, grown)
				}
				ss.Values = append(ss.Values, model.SamplePair{Timestamp: t, Value: v})
				return true
			})
		case "histograms":
			it.ReportError("result", "native histograms are not a figure the analyzer reads")
		default:
			it.Skip()
		}
		return it.Error == nil
	})
	if it.Error != nil {
		return nil, 0
	}
	return ss, cost
}

// readSample reads one sample of a vector and returns it and the bytes it
// holds; nil past a cap or on a malformed sample.
func (d *decoder) readSample(it *jsoniter.Iterator) (*model.Sample, int64) {
	if err := d.t.Series(1); err != nil {
		d.fail(it, err)
		return nil, 0
	}
	if err := d.t.Samples(1); err != nil {
		d.fail(it, err)
		return nil, 0
	}
	s := &model.Sample{}
	cost := int64(query.SampleBytes)
	if !d.hold(it, cost) {
		return nil, 0
	}
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		switch key {
		case "metric":
			var c int64
			s.Metric, c = d.readMetric(it)
			cost += c
		case "value":
			s.Timestamp, s.Value = readPoint(it)
		case "histogram":
			it.ReportError("result", "native histograms are not a figure the analyzer reads")
		default:
			it.Skip()
		}
		return it.Error == nil
	})
	if it.Error != nil {
		return nil, 0
	}
	return s, cost
}

// labelBytes is what one label costs while its series is decoded: its
// share of the map (a 32-byte slot, a control byte and the group's
// header, rounded) and its two strings' headers' rounding.
const labelBytes = 56

// readMetric reads a label set and returns it and the bytes it holds: each
// label counted as it is read; a whole answer's label set shared with the
// cycle's earlier answers of the same series, for nothing.
func (d *decoder) readMetric(it *jsoniter.Iterator) (model.Metric, int64) {
	d.lbls = d.lbls[:0]
	var cost int64 = 48 // the map's header
	if !d.hold(it, cost) {
		return nil, 0
	}
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		v := it.ReadString()
		c := labelBytes + int64(len(key)+len(v))
		cost += c
		d.lbls = append(d.lbls, key, v)
		return d.hold(it, c)
	})
	if it.Error != nil {
		return nil, 0
	}
	build := func() (model.Metric, int64) {
		m := make(model.Metric, len(d.lbls)/2)
		for i := 0; i < len(d.lbls); i += 2 {
			m[model.LabelName(d.lbls[i])] = model.LabelValue(d.lbls[i+1])
		}
		return m, 0
	}
	if d.each != nil {
		m, _ := build()
		return m, cost
	}
	d.key = d.key[:0]
	for _, s := range d.lbls {
		d.key = append(d.key, s...)
		d.key = append(d.key, 0xff)
	}
	m, fresh := d.t.Cycle().Metric(d.key, build)
	if fresh == 0 {
		// Shared: the labels just read are garbage, not held.
		d.t.Release(cost)
		return m, 0
	}
	if !d.hold(it, fresh) {
		return nil, 0
	}
	return m, cost + fresh
}

// readPoint reads [timestamp, "value"].
func readPoint(it *jsoniter.Iterator) (model.Time, model.SampleValue) {
	var t model.Time
	var v float64
	i := 0
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		switch i {
		case 0:
			t = readTime(it)
		case 1:
			s := it.ReadString()
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				it.ReportError("value", fmt.Sprintf("sample value %q is not a number", oneLine(s)))
			}
			v = x
		default:
			it.ReportError("value", "a sample is not [timestamp, value]")
			return false
		}
		i++
		return it.Error == nil
	})
	if i < 2 && it.Error == nil {
		it.ReportError("value", "a sample is not [timestamp, value]")
	}
	return t, model.SampleValue(v)
}

// maxSeconds bounds a timestamp: milliseconds of it fit an int64 (about
// 292 million years either way).
const maxSeconds = math.MaxInt64 / 1000

// readTime reads a timestamp in seconds (with up to millisecond
// precision) exactly, without a float's rounding.
func readTime(it *jsoniter.Iterator) model.Time {
	n := it.ReadNumber()
	s := string(n)
	sec, frac, _ := strings.Cut(s, ".")
	whole, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || strings.ContainsAny(s, "eE") {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.Abs(f) >= maxSeconds {
			it.ReportError("timestamp", fmt.Sprintf("timestamp %q is not a time", oneLine(s)))
			return 0
		}
		return model.Time(math.Round(f * 1000))
	}
	if whole >= maxSeconds || whole <= -maxSeconds {
		it.ReportError("timestamp", fmt.Sprintf("timestamp %q is not a time", oneLine(s)))
		return 0
	}
	ms := whole * 1000
	if frac != "" {
		frac = (frac + "000")[:3]
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil || f < 0 {
			it.ReportError("timestamp", fmt.Sprintf("timestamp %q is not a number", oneLine(s)))
			return 0
		}
		if strings.HasPrefix(sec, "-") {
			f = -f
		}
		ms += f
	}
	return model.Time(ms)
}

// snippet is the start of a body that is not the API's JSON, for an error.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		b = append(b[:200:200], "…"...)
	}
	return oneLine(string(b))
}
