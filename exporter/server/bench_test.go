package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/internal/fixture"
)

// discardWriter is a ResponseWriter that copies the body into a reused
// buffer, as a socket write copies into the kernel. Both benchmarks share it
// so that only the work of the handler differs.
type discardWriter struct {
	h   http.Header
	buf []byte
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) {
	d.buf = append(d.buf[:0], b...)
	return len(b), nil
}
func (d *discardWriter) WriteHeader(int) {}

func node8x4(b testing.TB) *collector.Collector {
	c, err := collector.New(collector.Options{Source: staticSource{fixture.Snapshot(8, 4)}, Interval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.CollectOnce(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkScrape serves /metrics for a node of 8 GPUs with 4 processes each.
func BenchmarkScrape(b *testing.B) {
	c := node8x4(b)
	h := MetricsHandler(c)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(c.Latest().Text)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h.ServeHTTP(w, req)
	}
}

// BenchmarkPreparedBuffer writes the same bytes from a prepared buffer: the
// floor a scrape handler can reach. scripts/bench-scrape.sh prints the ratio.
func BenchmarkPreparedBuffer(b *testing.B) {
	c := node8x4(b)
	buf := append([]byte(nil), c.Latest().Text...)
	w := &discardWriter{h: http.Header{}}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Header().Set("Content-Type", ContentType)
		_, _ = w.Write(buf)
	}
}

// BenchmarkCollectAndRender is one collection cycle of the collector itself
// (render + encode) for 8 GPUs × 4 processes, without the source's cost.
func BenchmarkCollectAndRender(b *testing.B) {
	c := node8x4(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.CollectOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNoMemoryGrowthAcrossScrapes serves 10,000 scrapes and checks the heap
// does not grow with them.
func TestNoMemoryGrowthAcrossScrapes(t *testing.T) {
	c := node8x4(t)
	h := Handler(c, "test")
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &discardWriter{h: http.Header{}}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := 0; i < 100; i++ {
		h.ServeHTTP(w, req)
	}
	before := heap()
	for i := 0; i < 10000; i++ {
		h.ServeHTTP(w, req)
		if i%1000 == 0 { // collections keep happening in between, as in production
			if _, err := c.CollectOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := heap()
	if after > before+512<<10 {
		t.Errorf("heap grew from %d to %d bytes over 10,000 scrapes", before, after)
	}
	t.Logf("heap before %d KiB, after 10,000 scrapes %d KiB", before>>10, after>>10)
}

// TestScrapeAllocsDocumented: the allocations per scrape that
// docs/performance.md states are what a scrape allocates now.
func TestScrapeAllocsDocumented(t *testing.T) {
	c := node8x4(t)
	h := MetricsHandler(c)
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	w := &discardWriter{h: http.Header{}}
	got := int(testing.AllocsPerRun(200, func() { h.ServeHTTP(w, req) }))
	doc, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\| the handler alone, in process, 8 GPUs × 4 processes \| [^|]*?(\d+) allocs/op`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/performance.md has no allocation figure for the handler")
	}
	if want, _ := strconv.Atoi(string(m[1])); want != got {
		t.Errorf("docs/performance.md says %d allocs per scrape, a scrape makes %d: rerun scripts/bench-scrape.sh and update it", want, got)
	}
}
