package promapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/klauspost/compress/snappy"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

var _ query.SampleReader = (*Client)(nil)

// MaxFrameBytes bounds one frame of a streamed remote-read answer.
// Prometheus cuts its frames at --storage.remote.read-max-bytes-in-frame
// (1 MiB by default) but never splits a series' chunk, so a frame may be
// somewhat larger; no sane one is this large.
const MaxFrameBytes = 64 << 20

// streamedType is the content type of a streamed remote-read answer.
const streamedType = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ReadSamples reads the samples stored of metric in [start, end] through
// Prometheus' remote-read API (/api/v1/read), asking for streamed XOR
// chunks: the server ships its chunks as stored, evaluating no PromQL and
// encoding no JSON, and the chunks are decoded here (docs/planner.md has
// what that saves). Staleness markers are dropped, as a range selector
// drops them. A server without the API (VictoriaMetrics single-node
// answers 400 "unsupported path"; most query frontends 404) or that
// answers only sampled responses gives errors.ErrUnsupported before any
// series is handed on, so that the caller can ask the query API instead.
//
// storage/remote's client is not used: it links the cloud SDKs of its
// write path's authentication, which the analyzer never calls.
func (c *Client) ReadSamples(ctx context.Context, metric string, start, end time.Time, each func(model.Metric, []model.SamplePair) error) error {
	if c.noRemoteRead.Load() {
		return errors.ErrUnsupported
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	t := query.NewTally(ctx, c.limits)
	defer t.Done()
	err := c.readSamples(ctx, metric, start, end, t, each)
	if errors.Is(err, errors.ErrUnsupported) {
		// A server's API does not change between reads: ask it once.
		if !c.noRemoteRead.Swap(true) {
			c.logger.Debug("no remote read: the recorded figures are read through the query API", "url", c.url, "reason", err)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("remote read %s %s: %w", c.url, metric, err)
	}
	return nil
}

func (c *Client) readSamples(ctx context.Context, metric string, start, end time.Time, t *query.Tally, each func(model.Metric, []model.SamplePair) error) error {
	from, to := start.UnixMilli(), end.UnixMilli()
	req := &prompb.ReadRequest{
		Queries: []*prompb.Query{{StartTimestampMs: from, EndTimestampMs: to,
			Matchers: []*prompb.LabelMatcher{{Type: prompb.LabelMatcher_EQ, Name: model.MetricNameLabel, Value: metric}}}},
		AcceptedResponseTypes: []prompb.ReadRequest_ResponseType{prompb.ReadRequest_STREAMED_XOR_CHUNKS},
	}
	pb, err := req.Marshal()
	if err != nil {
		return err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.url, "/")+"/api/v1/read", bytes.NewReader(snappy.Encode(nil, pb)))
	if err != nil {
		return err
	}
	hr.Header.Set("Content-Encoding", "snappy")
	hr.Header.Set("Content-Type", "application/x-protobuf")
	hr.Header.Set("X-Prometheus-Remote-Read-Version", "0.1.0")
	resp, err := c.http.Do(hr)
	if err != nil {
		return err
	}
	defer drain(resp)
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusNotFound, resp.StatusCode == http.StatusMethodNotAllowed,
		resp.StatusCode == http.StatusNotImplemented, resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("%w: server answered %s", errors.ErrUnsupported, resp.Status)
	case resp.StatusCode/100 != 2:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("server answered %s: %s", resp.Status, snippet(b))
	case ct != streamedType:
		return fmt.Errorf("%w: the answer is %q, not streamed chunks", errors.ErrUnsupported, ct)
	}
	return decodeFrames(&counted{r: resp.Body, n: MaxAnswerBytes}, t, from, to, each)
}

// decodeFrames reads a streamed remote-read answer (each frame a uvarint
// length, the CRC-32C of the frame, then a ChunkedReadResponse) and hands
// each series' samples in [from, to] on; a series cut across frames is
// joined first. What it holds (the frame's buffer, the series being
// joined) is counted against t before it is allocated, and a series'
// bytes released once each has taken it.
func decodeFrames(r *counted, t *query.Tally, from, to int64, each func(model.Metric, []model.SamplePair) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	f := &frameFold{t: t, from: from, to: to, each: each}
	var buf []byte
	for {
		var err error
		if buf, err = readFrame(br, r, t, buf); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		// The chunks are decoded before the next frame overwrites buf.
		if err := decodeFrame(buf, &f.fs, f.series); err != nil {
			return err
		}
	}
	return f.flush()
}

// frameFold joins the series of a streamed answer and hands each on.
type frameFold struct {
	t        *query.Tally
	from, to int64
	each     func(model.Metric, []model.SamplePair) error
	fs       frameSeries
	it       chunkenc.Iterator
	cur      model.Metric
	key, kb  []byte
	pts      []model.SamplePair
	held     int64 // the bytes cur and pts hold
}

// flush hands the series joined so far on and releases its bytes.
func (f *frameFold) flush() error {
	if f.cur == nil {
		return nil
	}
	err := f.each(f.cur, f.pts)
	f.cur, f.pts = nil, nil
	f.t.Release(f.held)
	f.held = 0
	return err
}

// series adds one series of a frame: a new series when its labels differ
// from the one being joined.
func (f *frameFold) series(s *frameSeries) error {
	f.kb = labelKey(f.kb[:0], s)
	if f.cur == nil || !bytes.Equal(f.kb, f.key) {
		if err := f.flush(); err != nil {
			return err
		}
		if err := f.t.Series(1); err != nil {
			return err
		}
		cost := metricCost(s)
		if err := f.t.Hold(cost); err != nil {
			return err
		}
		f.held = cost
		f.key, f.cur = append(f.key[:0], f.kb...), seriesMetric(s)
	}
	for _, ch := range s.chunks {
		if ch.maxT < f.from || ch.minT > f.to {
			continue
		}
		if err := f.chunk(ch); err != nil {
			return fmt.Errorf("series %s: %w", f.cur, err)
		}
	}
	return nil
}

// chunk appends the samples of one XOR chunk in the window, counting the
// samples its header says it holds before any is decoded.
func (f *frameFold) chunk(ch frameChunk) error {
	if ch.encoding != int32(prompb.Chunk_XOR) {
		return fmt.Errorf("a chunk of encoding %s, want XOR (float samples)", prompb.Chunk_Encoding(ch.encoding))
	}
	if len(ch.data) < 2 {
		// chunkenc reads the sample count from the first two bytes
		// without checking that they are there: a panic, not an error.
		return fmt.Errorf("a chunk of %d bytes: too short to be one", len(ch.data))
	}
	c, err := chunkenc.FromData(chunkenc.EncXOR, ch.data)
	if err != nil {
		return err
	}
	n := c.NumSamples()
	if err := f.t.Samples(int64(n)); err != nil {
		return err
	}
	if len(f.pts)+n > cap(f.pts) {
		// Grown by a quarter at a time, not doubled, and counted before it
		// is allocated, the old array with it until it is copied: what
		// the series holds, at its peak too, is what is counted.
		size := max(len(f.pts)+n, cap(f.pts)+cap(f.pts)/4)
		grown := int64(size) * query.PairBytes
		if err := f.t.Hold(grown); err != nil {
			return err
		}
		pts := make([]model.SamplePair, len(f.pts), size)
		copy(pts, f.pts)
		old := int64(cap(f.pts)) * query.PairBytes
		f.t.Release(old)
		f.held += grown - old
		f.pts = pts
	}
	f.it = c.Iterator(f.it)
	for f.it.Next() == chunkenc.ValFloat {
		t, v := f.it.At()
		if t < f.from || t > f.to || value.IsStaleNaN(v) {
			continue
		}
		f.pts = append(f.pts, model.SamplePair{Timestamp: model.Time(t), Value: model.SampleValue(v)})
	}
	return f.it.Err()
}

// readFrame reads the next frame into buf (grown as needed, the growth
// counted against t first): io.EOF at the end of the stream, an error for
// a frame cut short, oversized or corrupt.
func readFrame(br *bufio.Reader, r *counted, t *query.Tally, buf []byte) ([]byte, error) {
	size, err := binary.ReadUvarint(br)
	if err == io.EOF {
		return buf, io.EOF
	}
	if err != nil {
		return buf, frameErr(r, err)
	}
	if size > MaxFrameBytes {
		return buf, fmt.Errorf("a frame of %d bytes: over the %d MiB bound", size, MaxFrameBytes>>20)
	}
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return buf, frameErr(r, err)
	}
	if cap(buf) < int(size) {
		if err := t.Hold(int64(size) - int64(cap(buf))); err != nil {
			return buf, err
		}
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := io.ReadFull(br, buf); err != nil {
		return buf, frameErr(r, err)
	}
	if crc32.Checksum(buf, castagnoli) != binary.BigEndian.Uint32(sum[:]) {
		return buf, errors.New("a corrupt frame: checksum mismatch")
	}
	return buf, nil
}

// frameErr is the error of a frame cut short: the answer's bound, or the
// stream ending early.
func frameErr(r *counted, err error) error {
	if r.over {
		return fmt.Errorf("the answer is larger than %d MiB: narrow the query", MaxAnswerBytes>>20)
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("a frame cut short: %w", err)
}

// metricCost is what the label set of s costs once a model.Metric.
func metricCost(s *frameSeries) int64 {
	var text int64
	for i, n := range s.names {
		text += int64(len(n) + len(s.values[i]))
	}
	return query.MetricBytes(len(s.names), text)
}

// labelKey appends to b the key that identifies a series across frames.
func labelKey(b []byte, s *frameSeries) []byte {
	for i, n := range s.names {
		b = append(b, n...)
		b = append(b, 0xff)
		b = append(b, s.values[i]...)
		b = append(b, 0xff)
	}
	return b
}

func seriesMetric(s *frameSeries) model.Metric {
	m := make(model.Metric, len(s.names))
	for i, n := range s.names {
		m[model.LabelName(n)] = model.LabelValue(s.values[i])
	}
	return m
}
