package promapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/prompb"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// small are caps a test reaches with a few KB of input.
var small = query.Limits{AnswerSeries: 100, AnswerSamples: 1000, AnswerBytes: 64 << 10, CycleSeries: 150, CycleSamples: 1500, CycleBytes: 96 << 10}

// repeat is n copies of s joined by sep.
func repeat(s string, n int, sep string) string {
	return strings.TrimSuffix(strings.Repeat(s+sep, n), sep)
}

// series is n one-sample matrix series, each of labels of its own.
func series(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"metric":{"i":"%d"},"values":[[1,"1"]]}`, i)
	}
	return b.String()
}

func matrixOf(result string) string {
	return `{"status":"success","data":{"resultType":"matrix","result":[` + result + `]}}`
}

// hostileJSON is the query API's answers built to break a decoder: each
// must be a clear error (err holds what it names) or a safe answer (err
// empty: the answer decodes within the caps).
func hostileJSON() []struct{ name, body, err string } {
	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	cases := []struct{ name, body, err string }{
		{"empty body", ``, "decode answer"},
		{"null", `null`, "no status"},
		{"a number", `42`, "decode answer"},
		{"an array", `[1,2,3]`, "decode answer"},
		{"a string", `"success"`, "decode answer"},
		{"truncated object", `{"status":"succ`, "decode answer"},
		{"no data", `{"status":"success"}`, "no result"},
		{"data null", `{"status":"success","data":null}`, "no result"},
		{"unknown result type", `{"status":"success","data":{"resultType":"table","result":[]}}`, "unknown result type"},
		{"result type not a string", `{"status":"success","data":{"resultType":7,"result":[]}}`, "decode answer"},
		{"deep nesting in result", `{"status":"success","data":{"resultType":"matrix","result":` + deep + `}}`, "decode answer"},
		{"deep nesting skipped", `{"status":"success","stats":` + deep + `,"data":{"resultType":"matrix","result":[]}}`, "decode answer"},
		{"deep nesting in a label", matrixOf(`{"metric":{"a":` + deep + `},"values":[]}`), "decode answer"},
		{"deep nesting in a sample", matrixOf(`{"metric":{},"values":[` + deep + `]}`), "decode answer"},
		{"value a number", matrixOf(`{"metric":{},"values":[[1,1]]}`), "decode answer"},
		{"value a word", matrixOf(`{"metric":{},"values":[[1,"lots"]]}`), "not a number"},
		{"value empty", matrixOf(`{"metric":{},"values":[[1,""]]}`), "not a number"},
		{"value null", matrixOf(`{"metric":{},"values":[[1,null]]}`), "not a number"},
		{"value an object", matrixOf(`{"metric":{},"values":[[1,{}]]}`), "decode answer"},
		{"value NaN", matrixOf(`{"metric":{},"values":[[1,"NaN"]]}`), ""},
		{"value +Inf", matrixOf(`{"metric":{},"values":[[1,"+Inf"]]}`), ""},
		{"value -Inf", matrixOf(`{"metric":{},"values":[[1,"-Inf"]]}`), ""},
		{"value 1e400", matrixOf(`{"metric":{},"values":[[1,"1e400"]]}`), "not a number"},
		{"value hex", matrixOf(`{"metric":{},"values":[[1,"0x10"]]}`), "not a number"},
		{"value a thousand digits", matrixOf(`{"metric":{},"values":[[1,"` + strings.Repeat("9", 1000) + `"]]}`), "not a number"},
		{"timestamp a string", matrixOf(`{"metric":{},"values":[["1","1"]]}`), "decode answer"},
		{"timestamp NaN", matrixOf(`{"metric":{},"values":[[NaN,"1"]]}`), "decode answer"},
		{"timestamp 1e400", matrixOf(`{"metric":{},"values":[[1e400,"1"]]}`), "not a time"},
		{"timestamp 1e300", matrixOf(`{"metric":{},"values":[[1e300,"1"]]}`), "not a time"},
		{"timestamp past int64", matrixOf(`{"metric":{},"values":[[9223372036854775807,"1"]]}`), "not a time"},
		{"timestamp negative fraction", matrixOf(`{"metric":{},"values":[[1.-5,"1"]]}`), "decode answer"},
		{"timestamp negative", matrixOf(`{"metric":{},"values":[[-1.5,"1"]]}`), ""},
		{"sample of one", matrixOf(`{"metric":{},"values":[[1]]}`), "not [timestamp, value]"},
		{"sample of three", matrixOf(`{"metric":{},"values":[[1,"1","2"]]}`), "not [timestamp, value]"},
		{"sample empty", matrixOf(`{"metric":{},"values":[[]]}`), "not [timestamp, value]"},
		{"sample an object", matrixOf(`{"metric":{},"values":[{"t":1}]}`), "decode answer"},
		{"values an object", matrixOf(`{"metric":{},"values":{}}`), "decode answer"},
		{"metric an array", matrixOf(`{"metric":[],"values":[]}`), "decode answer"},
		{"label value a number", matrixOf(`{"metric":{"a":1},"values":[]}`), "decode answer"},
		{"label value null", matrixOf(`{"metric":{"a":null},"values":[]}`), ""},
		{"duplicated series", matrixOf(repeat(`{"metric":{"a":"b"},"values":[[1,"1"]]}`, 50, ",")), ""},
		{"duplicated series past the series cap", matrixOf(repeat(`{"metric":{"a":"b"},"values":[[1,"1"]]}`, 101, ",")), query.FlagAnswerSeries},
		{"duplicated labels", matrixOf(`{"metric":{"a":"1","a":"2"},"values":[]}`), ""},
		{"series past the cap", matrixOf(series(101)), query.FlagAnswerSeries},
		{"samples past the cap", matrixOf(`{"metric":{},"values":[` + repeat(`[1,"1"]`, 1001, ",") + `]}`), query.FlagAnswerSamples},
		{"labels past the bytes", matrixOf(`{"metric":{` + labels(2000) + `},"values":[]}`), query.FlagAnswerBytes},
		{"a label value past the bytes", matrixOf(`{"metric":{"a":"` + strings.Repeat("x", 1<<20) + `"},"values":[]}`), query.FlagAnswerBytes},
		{"a skipped value past the bytes", `{"status":"success","stats":"` + strings.Repeat("x", 1<<20) + `","data":{"resultType":"matrix","result":[]}}`, query.FlagAnswerBytes},
		{"a long number past the bytes", matrixOf(`{"metric":{},"values":[[1` + strings.Repeat("0", 1<<20) + `,"1"]]}`), query.FlagAnswerBytes},
		{"whitespace past the bytes", matrixOf(strings.Repeat(" ", 1<<20)), query.FlagAnswerBytes},
		{"result before its type, past the bytes", `{"status":"success","data":{"result":[{"metric":{"a":"` + strings.Repeat("x", 70<<10) + `"}}],"resultType":"matrix"}}`, query.FlagAnswerBytes},
		{"result before its type", `{"status":"success","data":{"result":[` + series(3) + `],"resultType":"matrix"}}`, ""},
		{"vector past the series cap", `{"status":"success","data":{"resultType":"vector","result":[` + repeat(`{"metric":{},"value":[1,"1"]}`, 101, ",") + `]}}`, query.FlagAnswerSeries},
		{"scalar", `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`, ""},
		{"scalar a word", `{"status":"success","data":{"resultType":"scalar","result":[1,"x"]}}`, "not a number"},
		{"string", `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, ""},
		{"error status, long message", `{"status":"error","errorType":"bad_data","error":"` + strings.Repeat("e\\n", 5000) + `"}`, "bad_data"},
		{"error type with newlines", `{"status":"error","errorType":"a\nb","error":"c"}`, "a b: c"},
		{"status success, error code", `{"status":"success","data":{"resultType":"matrix","result":[]}}`, ""},
		{"histograms", matrixOf(`{"metric":{},"histograms":[[1,{}]]}`), "native histograms"},
		{"warnings not strings", `{"status":"success","warnings":[1],"data":{"resultType":"matrix","result":[]}}`, "decode answer"},
		{"warnings an object", `{"status":"success","warnings":{},"data":{"resultType":"matrix","result":[]}}`, "decode answer"},
		{"infos many", `{"status":"success","infos":[` + repeat(`"i"`, 10000, ",") + `],"data":{"resultType":"matrix","result":[]}}`, ""},
		{"unknown keys", `{"status":"success","x":{"y":[1,2,{"z":null}]},"data":{"resultType":"matrix","result":[],"more":true}}`, ""},
		{"invalid UTF-8 label", matrixOf("{\"metric\":{\"a\":\"\xff\xfe\"},\"values\":[]}"), ""},
		{"escaped label", matrixOf(`{"metric":{"a\u0000":"\ud800"},"values":[]}`), ""},
		{"trailing garbage", matrixOf("") + `garbage`, ""},
	}
	return cases
}

// labels is n labels of a series.
func labels(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"l%d":"v"`, i)
	}
	return b.String()
}

// TestHostileAnswers: each hostile answer of the query API, served by a
// server, is a clear error naming what is wrong (the cap's flag past a
// cap) in one line, or a safe answer, under small caps.
func TestHostileAnswers(t *testing.T) {
	for _, tc := range hostileJSON() {
		t.Run(tc.name, func(t *testing.T) {
			s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if strings.Contains(tc.body, `"status":"error"`) {
					w.WriteHeader(http.StatusBadRequest)
				}
				_, _ = w.Write([]byte(tc.body))
			}))
			defer s.Close()
			cl, err := New(s.URL, Options{Timeout: 5 * time.Second, Limits: small})
			if err != nil {
				t.Fatal(err)
			}
			_, err = cl.QueryRange(context.Background(), "up", rangeOf())
			if tc.err == "" {
				if err != nil {
					t.Fatalf("a safe answer wanted, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), `"up"`) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want one line naming %q and the query", err, tc.err)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error of %d bytes: want one short line", len(err.Error()))
			}
		})
	}
}

// TestCycleShared: the answers of one fan-out share the cycle's caps, and
// a label set decoded once is shared by the cycle's later answers and not
// counted again; two fan-outs are two cycles.
func TestCycleShared(t *testing.T) {
	// Sixty series of 300-byte labels: about 50 KB decoded, two such
	// answers of other series past the cycle's 96 KB.
	body := matrixOf(strings.ReplaceAll(series(60), `"},"values"`, strings.Repeat("x", 300)+`"},"values"`))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = r.ParseForm()
		if r.Form.Get("query") == "other" {
			_, _ = w.Write([]byte(strings.ReplaceAll(body, `"i"`, `"j"`)))
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer s.Close()
	cl, err := New(s.URL, Options{Timeout: 5 * time.Second, Limits: small})
	if err != nil {
		t.Fatal(err)
	}
	r := rangeOf()
	for _, tc := range []struct {
		name  string
		calls []query.Call
		err   string
	}{
		{"two answers under the cycle's series cap", []query.Call{query.Ranged("up", r), query.Ranged("up", r)}, ""},
		{"three answers past the cycle's series cap", []query.Call{query.Ranged("up", r), query.Ranged("up", r), query.Ranged("up", r)}, query.FlagCycleSeries},
		{"the same series shared, the bytes counted once", []query.Call{query.Ranged("up", r), query.Ranged("up", r)}, ""},
		{"other series past the cycle's bytes", []query.Call{query.Ranged("up", r), query.Ranged("other", r)}, query.FlagCycleBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []model.Matrix
			err := query.Fan(context.Background(), cl, tc.calls, 1, func(i int, v model.Value) error {
				got = append(got, v.(model.Matrix))
				return nil
			})
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 2 && len(got[0]) == 60 && fmt.Sprintf("%p", got[0][0].Metric) != fmt.Sprintf("%p", got[1][0].Metric) {
					t.Error("the second answer's label sets are not the first's")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one naming %s", err, tc.err)
			}
		})
	}
}

// TestFoldedStreams: a Folded call's answer reaches apply a series at a
// time, and what each series held is given back once it is applied: a
// cycle may read many more series than its bytes could hold whole.
func TestFoldedStreams(t *testing.T) {
	body := matrixOf(series(140))
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer s.Close()
	lim := small
	lim.AnswerSeries, lim.CycleSeries, lim.CycleBytes, lim.AnswerBytes = 1000, 1000, 4<<10, 4<<10
	cl, err := New(s.URL, Options{Timeout: 5 * time.Second, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	for _, folded := range []bool{true, false} {
		call := query.Ranged("up", rangeOf())
		if folded {
			call = call.Folded()
		}
		parts := 0
		err := query.Fan(context.Background(), cl, []query.Call{call}, 1, func(i int, v model.Value) error {
			parts++
			return nil
		})
		switch {
		case folded && (err != nil || parts != 140):
			t.Errorf("folded: %d parts, err %v; want 140 and none", parts, err)
		case !folded && (err == nil || !strings.Contains(err.Error(), query.FlagAnswerBytes)):
			t.Errorf("whole: err %v, want one naming %s", err, query.FlagAnswerBytes)
		}
	}
}

// TestWarningsOneLine: an answer with 5 million warnings makes one log line
// that counts them, and an error that counts them, whatever their number.
func TestWarningsOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("serves 30 MB of warnings")
	}
	const n = 5_000_000
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var b bytes.Buffer
		b.WriteString(`{"status":"success","warnings":[`)
		b.WriteString(repeat(`"store down"`, n, ","))
		b.WriteString(`],"data":{"resultType":"vector","result":[]}}`)
		_, _ = w.Write(b.Bytes())
	}))
	defer s.Close()
	for _, allow := range []bool{true, false} {
		var lines atomic.Int64
		var logged string
		h := &countingHandler{n: &lines, last: &logged}
		cl, err := New(s.URL, Options{Timeout: time.Minute, AllowWarnings: allow, Logger: slog.New(h)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Query(context.Background(), "up", time.Unix(1767225600, 0))
		if lines.Load() != 1 || !strings.Contains(logged, "count=5000000") || !strings.Contains(logged, "store down") {
			t.Errorf("allow=%v: %d log lines, the last %q; want one counting 5000000", allow, lines.Load(), logged)
		}
		if allow != (err == nil) || (!allow && !strings.Contains(err.Error(), "5000000 warnings")) {
			t.Errorf("allow=%v: error %v", allow, err)
		}
	}
}

type countingHandler struct {
	n    *atomic.Int64
	last *string
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.n.Add(1)
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	*h.last = b.String()
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// rawFrame frames b with its length and checksum, the length given.
func rawFrame(size uint64, b []byte) []byte {
	out := binary.AppendUvarint(nil, size)
	out = binary.BigEndian.AppendUint32(out, crcOf(b))
	return append(out, b...)
}

func crcOf(b []byte) uint32 {
	return binary.BigEndian.Uint32(framed(b)[len(binary.AppendUvarint(nil, uint64(len(b)))):])
}

// TestHostileFrames: remote-read answers built to break the frame decoder
// are each a clear error or a safe answer, under small caps.
func TestHostileFrames(t *testing.T) {
	a := []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "host", Value: "a"}}
	ok := &prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{{Labels: a, Chunks: []prompb.Chunk{xorChunk(t, []int64{100, 110}, []float64{1, 2})}}}}
	good := frames(t, ok)
	msg, _ := ok.Marshal()
	many := func(n int, lbl func(i int) []prompb.Label, ch func() []prompb.Chunk) []byte {
		r := &prompb.ChunkedReadResponse{}
		for i := range n {
			r.ChunkedSeries = append(r.ChunkedSeries, &prompb.ChunkedSeries{Labels: lbl(i), Chunks: ch()})
		}
		return frames(t, r)
	}
	one := func(int) []prompb.Label { return a }
	distinct := func(i int) []prompb.Label { return []prompb.Label{{Name: "i", Value: strconv.Itoa(i)}} }
	small1 := func() []prompb.Chunk { return []prompb.Chunk{xorChunk(t, []int64{100}, []float64{1})} }
	big := func() []prompb.Chunk {
		ts, vs := make([]int64, 600), make([]float64, 600)
		for i := range ts {
			ts[i], vs[i] = int64(100+i), 1
		}
		return []prompb.Chunk{xorChunk(t, ts, vs)}
	}
	lying := func() []prompb.Chunk {
		c := xorChunk(t, []int64{100}, []float64{1})
		c.Data = append([]byte{0xff, 0xff}, c.Data[2:]...) // claims 65,535 samples
		return []prompb.Chunk{c}
	}
	nan := func() []prompb.Chunk {
		return []prompb.Chunk{xorChunk(t, []int64{100, 101, 102}, []float64{math.NaN(), math.Inf(1), math.Inf(-1)})}
	}
	for _, tc := range []struct {
		name string
		body []byte
		err  string
	}{
		{"empty", nil, ""},
		{"good", good, ""},
		{"truncated length", []byte{0x80}, "cut short"},
		{"truncated checksum", append(binary.AppendUvarint(nil, 5), 1, 2), "cut short"},
		{"truncated message", good[:len(good)-3], "cut short"},
		{"length past the bound", rawFrame(MaxFrameBytes+1, nil), "bound"},
		{"length 2^63", rawFrame(1<<63, nil), "bound"},
		{"length a varint of 11 bytes", append(bytes.Repeat([]byte{0xff}, 10), 0x01), "cut short"},
		{"length longer than the stream", rawFrame(1000, msg), "cut short"},
		{"length past the bytes left", rawFrame(1<<20, bytes.Repeat([]byte{0}, 1<<20)), query.FlagAnswerBytes},
		{"checksum wrong", append(binary.BigEndian.AppendUint32(binary.AppendUvarint(nil, uint64(len(msg))), 0), msg...), "checksum"},
		{"message garbage", framed([]byte{0x0a, 0x7f, 0x01}), "malformed"},
		{"message a huge field length", framed([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}), "malformed"},
		{"message a negative varint", framed(append([]byte{0x08}, bytes.Repeat([]byte{0xff}, 9)...)), "malformed"},
		{"message an unknown wire type", framed([]byte{0x0f}), "malformed"},
		{"message all zeros", framed(make([]byte, 64)), "malformed"},
		{"label a varint field", framed([]byte{0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01}), ""},
		{"chunk data garbage", many(1, one, func() []prompb.Chunk {
			return []prompb.Chunk{{MinTimeMs: 100, MaxTimeMs: 110, Type: prompb.Chunk_XOR, Data: []byte{0, 5, 0xff}}}
		}), "series"},
		{"chunk data empty", many(1, one, func() []prompb.Chunk {
			return []prompb.Chunk{{MinTimeMs: 100, MaxTimeMs: 110, Type: prompb.Chunk_XOR}}
		}), "series"},
		{"chunk of histograms", many(1, one, func() []prompb.Chunk {
			return []prompb.Chunk{{MinTimeMs: 100, MaxTimeMs: 110, Type: prompb.Chunk_HISTOGRAM, Data: []byte{0}}}
		}), "want XOR"},
		{"chunk of an unknown encoding", many(1, one, func() []prompb.Chunk {
			return []prompb.Chunk{{MinTimeMs: 100, MaxTimeMs: 110, Type: 99, Data: []byte{0}}}
		}), "want XOR"},
		{"chunk times lying outside the window", many(1, one, func() []prompb.Chunk {
			c := xorChunk(t, []int64{100}, []float64{1})
			c.MinTimeMs, c.MaxTimeMs = -1<<62, 1<<62
			return []prompb.Chunk{c}
		}), ""},
		{"chunk claiming 65,535 samples, past the samples", many(1, one, lying), query.FlagAnswerSamples},
		{"samples NaN and Inf", many(1, one, nan), ""},
		{"series past the cap", many(101, distinct, small1), query.FlagAnswerSeries},
		{"duplicated series joined into one", many(101, one, small1), ""},
		{"duplicated series under the caps", many(50, one, small1), ""},
		{"samples of one series past the bytes", many(8, one, big), query.FlagAnswerBytes},
		{"labels past the bytes", many(1, func(int) []prompb.Label {
			var l []prompb.Label
			for i := range 3000 {
				l = append(l, prompb.Label{Name: "l" + strconv.Itoa(i), Value: "v"})
			}
			return l
		}, small1), query.FlagAnswerBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := small
			lim.AnswerSamples, lim.CycleSamples = 5000, 5000
			tl := query.NewTally(context.Background(), lim)
			err := decodeFrames(&counted{r: bytes.NewReader(tc.body), n: MaxAnswerBytes}, tl, 0, 1<<40, func(model.Metric, []model.SamplePair) error { return nil })
			tl.Done()
			if held := tl.Cycle().Held(); held != 0 {
				t.Errorf("%d bytes still counted after the answer", held)
			}
			if tc.err == "" {
				if err != nil {
					t.Fatalf("a safe answer wanted, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want one line naming %q", err, tc.err)
			}
			var ce *query.CapError
			if strings.HasPrefix(tc.err, "query.") && !errors.As(err, &ce) {
				t.Errorf("error %v is not a CapError", err)
			}
		})
	}
}
