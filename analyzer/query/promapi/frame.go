package promapi

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// frameSeries is one series of a remote-read frame (prompb.ChunkedSeries),
// decoded in place: its label and chunk bytes point into the frame's
// buffer and are valid until the next frame is read. A week of a fleet is
// hundreds of thousands of frames of one series each; decoding them into
// prompb's types allocated a struct per label and copied every chunk,
// which cost the planner more than reading the samples.
type frameSeries struct {
	names, values [][]byte
	chunks        []frameChunk
}

// frameChunk is one chunk of a frameSeries (prompb.Chunk).
type frameChunk struct {
	minT, maxT int64
	encoding   int32
	data       []byte
}

// The field numbers of prompb's ChunkedReadResponse, ChunkedSeries, Label
// and Chunk.
const (
	fieldChunkedSeries = 1 // ChunkedReadResponse.chunked_series
	fieldLabels        = 1 // ChunkedSeries.labels
	fieldChunks        = 2 // ChunkedSeries.chunks
	fieldLabelName     = 1 // Label.name
	fieldLabelValue    = 2 // Label.value
	fieldChunkMinTime  = 1 // Chunk.min_time_ms
	fieldChunkMaxTime  = 2 // Chunk.max_time_ms
	fieldChunkType     = 3 // Chunk.type
	fieldChunkData     = 4 // Chunk.data
)

// errFrame is a frame that is not a well-formed ChunkedReadResponse.
var errFrame = errors.New("a malformed frame")

// eachField calls fn with each field of the message b; fn returns the
// bytes it consumed of the field's value, or -1 to have it skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errFrame
		}
		b = b[n:]
		if m := fn(num, typ, b); m >= 0 {
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return errFrame
		}
		b = b[m:]
	}
	return nil
}

// decodeFrame calls fn with each series of the ChunkedReadResponse in buf,
// decoded into s (reused: valid only during the call).
func decodeFrame(buf []byte, s *frameSeries, fn func(*frameSeries) error) error {
	var fnErr error
	err := eachField(buf, func(num protowire.Number, typ protowire.Type, v []byte) int {
		if num != fieldChunkedSeries || typ != protowire.BytesType || fnErr != nil {
			return -1
		}
		msg, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return -1 // ConsumeFieldValue then reports it
		}
		if err := s.decode(msg); err != nil {
			fnErr = err
		} else {
			fnErr = fn(s)
		}
		return n
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// decode reads one ChunkedSeries into s.
func (s *frameSeries) decode(msg []byte) error {
	s.names, s.values, s.chunks = s.names[:0], s.values[:0], s.chunks[:0]
	var bad bool
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, v []byte) int {
		if typ != protowire.BytesType || (num != fieldLabels && num != fieldChunks) {
			return -1
		}
		sub, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return -1
		}
		var err error
		if num == fieldLabels {
			err = s.label(sub)
		} else {
			err = s.chunk(sub)
		}
		bad = bad || err != nil
		return n
	})
	if err != nil || bad {
		return errFrame
	}
	return nil
}

func (s *frameSeries) label(msg []byte) error {
	var name, value []byte
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, v []byte) int {
		if typ != protowire.BytesType || (num != fieldLabelName && num != fieldLabelValue) {
			return -1
		}
		b, n := protowire.ConsumeBytes(v)
		if n < 0 {
			return -1
		}
		if num == fieldLabelName {
			name = b
		} else {
			value = b
		}
		return n
	})
	s.names, s.values = append(s.names, name), append(s.values, value)
	return err
}

func (s *frameSeries) chunk(msg []byte) error {
	var c frameChunk
	err := eachField(msg, func(num protowire.Number, typ protowire.Type, v []byte) int {
		switch {
		case typ == protowire.VarintType && (num == fieldChunkMinTime || num == fieldChunkMaxTime || num == fieldChunkType):
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return -1
			}
			switch num {
			case fieldChunkMinTime:
				c.minT = int64(x)
			case fieldChunkMaxTime:
				c.maxT = int64(x)
			default:
				c.encoding = int32(x)
			}
			return n
		case typ == protowire.BytesType && num == fieldChunkData:
			b, n := protowire.ConsumeBytes(v)
			if n < 0 {
				return -1
			}
			c.data = b
			return n
		}
		return -1
	})
	s.chunks = append(s.chunks, c)
	if err != nil {
		return fmt.Errorf("a chunk: %w", err)
	}
	return nil
}
