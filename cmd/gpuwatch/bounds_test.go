package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// boundsRSSKB is what a process fed a hostile Prometheus may take at its
// peak: the 512 MiB.
const boundsRSSKB = 512 << 10

// hostileProm is a Prometheus that answers the trivial query "1" and the
// planner's coverage probe as a small fleet would, and every other query
// (mode "json"), or every remote read (modes "series" and "chunks"), with
// an answer built to take memory: 30 MB of JSON of tiny series per query,
// or 60 MiB of remote-read frames of tiny series or of huge chunks.
func hostileProm(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		q := r.Form.Get("query")
		switch {
		case r.URL.Path == "/api/v1/read":
			w.Header().Set("Content-Type", "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse")
			writeFrames(t, w, mode, 60<<20)
		case r.URL.Path == "/api/v1/series":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":[]}`)
		case q == "1" || mode != "json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"100"]}]}}`, time.Now().Unix())
		default:
			w.Header().Set("Content-Type", "application/json")
			writeTinySeries(w, r.URL.Path == "/api/v1/query_range", 30<<20)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// writeTinySeries writes about size bytes of an answer of one-sample
// series, each with labels of its own.
func writeTinySeries(w http.ResponseWriter, matrix bool, size int) {
	bw := bufio.NewWriterSize(w, 64<<10)
	defer bw.Flush()
	typ := "vector"
	if matrix {
		typ = "matrix"
	}
	n, _ := fmt.Fprintf(bw, `{"status":"success","data":{"resultType":"%s","result":[`, typ)
	for i := 0; n < size; i++ {
		sep := ","
		if i == 0 {
			sep = ""
		}
		var k int
		var err error
		if matrix {
			k, err = fmt.Fprintf(bw, `%s{"metric":{"i":"%d"},"values":[[1767225600,"1"]]}`, sep, i)
		} else {
			k, err = fmt.Fprintf(bw, `%s{"metric":{"i":"%d"},"value":[1767225600,"1"]}`, sep, i)
		}
		if err != nil {
			return // the client hung up: it stopped at a cap
		}
		n += k
	}
	fmt.Fprint(bw, `]}}`)
}

// writeFrames writes about size bytes of remote-read frames: series of
// one small chunk each (mode "series"), or one series of chunks of 65,535
// samples each that compress to a few KiB (mode "chunks").
func writeFrames(t *testing.T, w http.ResponseWriter, mode string, size int) {
	now := time.Now().Add(-24 * time.Hour).UnixMilli()
	huge := chunkenc.NewXORChunk()
	app, _ := huge.Appender()
	for i := range int64(65535) {
		app.Append(0, now+i, 1)
	}
	small := chunkenc.NewXORChunk()
	app, _ = small.Appender()
	app.Append(0, now, 1)
	bw := bufio.NewWriterSize(w, 1<<20)
	defer bw.Flush()
	for written, id := 0, 0; written < size; {
		resp := &prompb.ChunkedReadResponse{}
		for b := 0; b < 1<<20; {
			cs := &prompb.ChunkedSeries{Labels: []prompb.Label{{Name: "i", Value: strconv.Itoa(id)}}}
			if mode == "series" {
				id++
				cs.Chunks = []prompb.Chunk{{MinTimeMs: now, MaxTimeMs: now, Type: prompb.Chunk_XOR, Data: small.Bytes()}}
			} else {
				for range 16 {
					cs.Chunks = append(cs.Chunks, prompb.Chunk{MinTimeMs: now, MaxTimeMs: now + 65534, Type: prompb.Chunk_XOR, Data: huge.Bytes()})
				}
			}
			resp.ChunkedSeries = append(resp.ChunkedSeries, cs)
			b += cs.Size()
		}
		m, err := resp.Marshal()
		if err != nil {
			t.Error(err)
			return
		}
		k, _ := bw.Write(binary.AppendUvarint(nil, uint64(len(m))))
		k2, _ := bw.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(m, crc32.MakeTable(crc32.Castagnoli))))
		k3, err := bw.Write(m)
		if err != nil {
			return // the client hung up: it stopped at a cap
		}
		written += k + k2 + k3
	}
}

// TestHostilePrometheusBounded: `gpuwatch plan` and one cycle of the
// analyzer daemon, run as real processes with the default caps against a
// Prometheus whose answers are built to take memory (30 MB of JSON of
// tiny series to every query; 60 MiB of remote-read frames of tiny series
// or of huge chunks), each stay under 512 MiB at their peak and exit 1
// with one line naming the query and the flag of the cap they reached.
func TestHostilePrometheusBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds hundreds of MB to each process")
	}
	if testtool.Race {
		// The bounded process is this test binary: race-instrumented, its
		// peak is mostly shadow memory and it parses at a tenth of the speed.
		t.Skip("bounds a process' memory: scripts/test.sh runs it without -race, beside the corpus week")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, mode string
		args       []string
		query      string // what the error names of the query
		flags      []string
	}{
		{"plan, JSON of tiny series", "json", []string{"plan", "--plan.recording-rules=auto"}, "count(", []string{query.FlagCycleBytes, query.FlagCycleSeries, query.FlagAnswerBytes}},
		{"plan, remote read of tiny series", "series", []string{"plan", "--plan.recording-rules=only"}, "remote read", []string{query.FlagAnswerSeries, query.FlagCycleBytes, query.FlagAnswerBytes}},
		{"plan, remote read of huge chunks", "chunks", []string{"plan", "--plan.recording-rules=only"}, "remote read", []string{query.FlagAnswerBytes, query.FlagCycleBytes, query.FlagAnswerSamples}},
		{"analyzer cycle, JSON of tiny series", "json", []string{"analyzer", "--once", "--policy.file=../../deploy/examples/policy.yaml",
			"--storage.path=" + filepath.Join(dir, "s.db")}, "_over_time(", []string{query.FlagCycleBytes, query.FlagAnswerBytes, query.FlagAnswerSeries}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hostileProm(t, tc.mode)
			peak := filepath.Join(t.TempDir(), "peak")
			cmd := exec.Command(self, append(tc.args, "--prometheus.url="+srv.URL)...)
			cmd.Env = append(os.Environ(), asMain+"=1", peakFile+"="+peak, "GOMAXPROCS=2")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			defer func() { t.Logf("stdout: %.2000s", stdout.String()) }()
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			b, rerr := os.ReadFile(peak)
			kb, perr := strconv.ParseInt(string(b), 10, 64)
			if rerr != nil || perr != nil {
				t.Fatalf("no peak written (%v %v); exit %v; stderr: %s", rerr, perr, err, stderr.String())
			}
			t.Logf("exit %d, peak %d MiB; stderr: %s", code, kb>>10, lastLine(stderr.String()))
			if kb > boundsRSSKB {
				t.Errorf("peak %d MiB, bound %d MiB", kb>>10, boundsRSSKB>>10)
			}
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			msg := lastLine(stderr.String())
			if errs := errorLines(stderr.String()); errs != 1 {
				t.Errorf("%d lines of error, want one: %s", errs, stderr.String())
			}
			named := false
			for _, f := range tc.flags {
				named = named || strings.Contains(msg, "--"+f)
			}
			if !named || !strings.Contains(msg, tc.query) {
				t.Errorf("the error %q names neither the query (%q) nor one of the flags %v", msg, tc.query, tc.flags)
			}
		})
	}
}

// lastLine is the last line of a process's stderr: its error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// errorLines counts the lines of a process's stderr that are not log
// records.
func errorLines(s string) int {
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if !strings.HasPrefix(l, "time=") && l != "" {
			n++
		}
	}
	return n
}
