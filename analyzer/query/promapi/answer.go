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
)

// MaxAnswerBytes bounds one answer's body. A week of hourly figures for
// 10,000 GPUs is under 100 MB; a server that streams without end is cut off
// here rather than taking the process' memory.
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
	warnings  []string
	value     model.Value
}

// decodeAnswer reads a query API answer from r.
func decodeAnswer(r io.Reader) (*answer, error) {
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
			a.error = it.ReadString()
		case "warnings", "infos":
			it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
				if w := it.ReadString(); key == "warnings" {
					a.warnings = append(a.warnings, w)
				}
				return true
			})
		case "data":
			if it.WhatIsNext() == jsoniter.NilValue {
				it.Skip()
				return true
			}
			it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
				switch key {
				case "resultType":
					resultType = it.ReadString()
				case "result":
					if resultType == "" {
						pending = append([]byte(nil), it.SkipAndReturnBytes()...)
						return true
					}
					a.value = readResult(it, resultType)
				default:
					it.Skip()
				}
				return true
			})
		default:
			it.Skip()
		}
		return true
	})
	if it.Error != nil && !errors.Is(it.Error, io.EOF) {
		return nil, fmt.Errorf("decode answer: %w", it.Error)
	}
	if pending != nil {
		pit := jsoniter.ParseBytes(jsoniter.ConfigDefault, pending)
		a.value = readResult(pit, resultType)
		if pit.Error != nil && !errors.Is(pit.Error, io.EOF) {
			return nil, fmt.Errorf("decode answer: %w", pit.Error)
		}
	}
	if a.status == "" {
		return nil, errors.New("decode answer: no status: not the Prometheus API's JSON")
	}
	return a, nil
}

// readResult reads the result of a resultType.
func readResult(it *jsoniter.Iterator, resultType string) model.Value {
	switch resultType {
	case "matrix":
		m := model.Matrix{}
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			ss := &model.SampleStream{}
			it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
				switch key {
				case "metric":
					ss.Metric = readMetric(it)
				case "values":
					it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
						t, v := readPoint(it)
						ss.Values = append(ss.Values, model.SamplePair{Timestamp: t, Value: v})
						return true
					})
				case "histograms":
					it.ReportError("result", "native histograms are not a figure the analyzer reads")
				default:
					it.Skip()
				}
				return true
			})
			m = append(m, ss)
			return true
		})
		return m
	case "vector":
		v := model.Vector{}
		it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
			s := &model.Sample{}
			it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
				switch key {
				case "metric":
					s.Metric = readMetric(it)
				case "value":
					s.Timestamp, s.Value = readPoint(it)
				case "histogram":
					it.ReportError("result", "native histograms are not a figure the analyzer reads")
				default:
					it.Skip()
				}
				return true
			})
			v = append(v, s)
			return true
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
	it.ReportError("result", fmt.Sprintf("unknown result type %q", resultType))
	return nil
}

// readMetric reads a label set.
func readMetric(it *jsoniter.Iterator) model.Metric {
	m := model.Metric{}
	it.ReadObjectCB(func(it *jsoniter.Iterator, key string) bool {
		m[model.LabelName(key)] = model.LabelValue(it.ReadString())
		return true
	})
	return m
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
				it.ReportError("value", fmt.Sprintf("sample value %q is not a number", s))
			}
			v = x
		default:
			it.Skip()
		}
		i++
		return true
	})
	if i < 2 {
		it.ReportError("value", "a sample is not [timestamp, value]")
	}
	return t, model.SampleValue(v)
}

// readTime reads a timestamp in seconds (with up to millisecond
// precision) exactly, without a float's rounding.
func readTime(it *jsoniter.Iterator) model.Time {
	n := it.ReadNumber()
	s := string(n)
	sec, frac, _ := strings.Cut(s, ".")
	whole, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || strings.ContainsAny(s, "eE") {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			it.ReportError("timestamp", fmt.Sprintf("timestamp %q is not a number", s))
			return 0
		}
		return model.Time(math.Round(f * 1000))
	}
	ms := whole * 1000
	if frac != "" {
		frac = (frac + "000")[:3]
		f, err := strconv.ParseInt(frac, 10, 64)
		if err != nil {
			it.ReportError("timestamp", fmt.Sprintf("timestamp %q is not a number", s))
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
