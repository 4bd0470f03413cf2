package promapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// xorChunk is a chunk of the samples (t, v) as Prometheus stores them.
func xorChunk(t *testing.T, ts []int64, vs []float64) prompb.Chunk {
	t.Helper()
	c := chunkenc.NewXORChunk()
	app, err := c.Appender()
	if err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		app.Append(0, ts[i], vs[i])
	}
	return prompb.Chunk{MinTimeMs: ts[0], MaxTimeMs: ts[len(ts)-1], Type: prompb.Chunk_XOR, Data: c.Bytes()}
}

// frames is a streamed remote-read answer of the responses, framed as
// Prometheus frames them (uvarint length, CRC-32C, message).
func frames(t *testing.T, rs ...*prompb.ChunkedReadResponse) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, r := range rs {
		b, err := r.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out.Write(binary.AppendUvarint(nil, uint64(len(b))))
		out.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))))
		out.Write(b)
	}
	return out.Bytes()
}

// TestDecodeFrames: frames encoded by Prometheus' own prompb types decode
// to each series' samples in the window, a series cut across frames
// joined, staleness markers and chunks outside the window dropped, the
// query index (a field the decoder does not need) skipped.
func TestDecodeFrames(t *testing.T) {
	a := []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "host", Value: "a"}}
	b := []prompb.Label{{Name: "__name__", Value: "m"}, {Name: "host", Value: "b"}}
	stale := math.Float64frombits(value.StaleNaN)
	answer := frames(t,
		&prompb.ChunkedReadResponse{QueryIndex: 3, ChunkedSeries: []*prompb.ChunkedSeries{{Labels: a, Chunks: []prompb.Chunk{
			xorChunk(t, []int64{0, 10}, []float64{-5, -6}), // before the window
			xorChunk(t, []int64{100, 110, 120}, []float64{1, stale, 2}),
		}}}},
		&prompb.ChunkedReadResponse{QueryIndex: 3, ChunkedSeries: []*prompb.ChunkedSeries{{Labels: a, Chunks: []prompb.Chunk{
			xorChunk(t, []int64{130, 140}, []float64{3, 4}),
		}}}},
		&prompb.ChunkedReadResponse{QueryIndex: 3, ChunkedSeries: []*prompb.ChunkedSeries{{Labels: b, Chunks: []prompb.Chunk{
			xorChunk(t, []int64{100, 300}, []float64{7, 8}), // 300 is after the window
		}}}},
	)
	var got []string
	err := decodeFrames(&counted{r: bytes.NewReader(answer), n: MaxAnswerBytes}, query.NewTally(context.Background(), query.Limits{}), 50, 200, func(m model.Metric, ps []model.SamplePair) error {
		got = append(got, fmt.Sprintf("%s %v", m, ps))
		return nil
	})
	want := []string{`m{host="a"} [1 @[0.1] 2 @[0.12] 3 @[0.13] 4 @[0.14]]`, `m{host="b"} [7 @[0.1]]`}
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("decoded (%v):\n%s\nwant:\n%s", err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A chunk of another encoding, and a frame that is not a message.
	hist := &prompb.ChunkedReadResponse{ChunkedSeries: []*prompb.ChunkedSeries{{Labels: a, Chunks: []prompb.Chunk{{MinTimeMs: 100, MaxTimeMs: 110, Type: prompb.Chunk_HISTOGRAM, Data: []byte{0}}}}}}
	for name, ans := range map[string][]byte{"histogram": frames(t, hist), "garbage": framed([]byte{0x0a, 0x7f, 0x01})} {
		err := decodeFrames(&counted{r: bytes.NewReader(ans), n: MaxAnswerBytes}, query.NewTally(context.Background(), query.Limits{}), 0, 200, func(model.Metric, []model.SamplePair) error { return nil })
		if err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// framed frames one raw message.
func framed(b []byte) []byte {
	out := binary.AppendUvarint(nil, uint64(len(b)))
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, b...)
}
