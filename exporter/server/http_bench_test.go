package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/internal/serve"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// scrapeHTTP is one measurement of a scrape over real loopback HTTP: the
// exporter's whole serving stack (internal/serve's bounded listener,
// exporter-toolkit, the handler) against a bare net/http server that writes
// the same bytes, identity and gzip, interleaved round by round so that a
// change in the machine's load touches both sides alike.
type scrapeHTTP struct {
	Bytes, GzipBytes         int
	Identity, IdentityFloor  time.Duration // medians per request
	Gzip, GzipFloor          time.Duration
	IdentityRatio, GzipRatio float64
	Rounds, PerRound         int
}

func measureScrapeHTTP(t testing.TB, rounds, perRound int) scrapeHTTP {
	c := node8x4(t)
	e := c.Latest()
	text, gz := e.Text, e.Gzipped()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	exp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addrs := []string{exp.Addr().String()}
	noConfig := ""
	go func() {
		_ = serve.ServeListener(ctx, exp, Handler(c, "bench"), &web.FlagConfig{WebListenAddresses: &addrs, WebConfigFile: &noConfig},
			slog.New(slog.DiscardHandler))
	}()
	floor, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The floor: net/http with nothing but the bytes, as a static file
	// server would send them.
	bare := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := text
		if r.Header.Get("Accept-Encoding") == "gzip" {
			w.Header().Set("Content-Encoding", "gzip")
			body = gz
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	})}
	go func() { _ = bare.Serve(floor) }()
	t.Cleanup(func() { _ = bare.Close() })

	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 2}, Timeout: 10 * time.Second}
	get := func(url, enc string, want int) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept-Encoding", enc)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || int(n) != want {
			t.Fatalf("GET %s (%s): %s, %d bytes, want %d", url, enc, resp.Status, n, want)
		}
	}
	expURL, floorURL := "http://"+exp.Addr().String()+"/metrics", "http://"+floor.Addr().String()+"/metrics"
	type side struct {
		url, enc string
		want     int
		per      []time.Duration
	}
	sides := []*side{{url: expURL, enc: "identity", want: len(text)}, {url: floorURL, enc: "identity", want: len(text)},
		{url: expURL, enc: "gzip", want: len(gz)}, {url: floorURL, enc: "gzip", want: len(gz)}}
	for _, s := range sides { // warm: connections open, caches hot
		for range perRound {
			get(s.url, s.enc, s.want)
		}
	}
	for r := range rounds {
		order := slices.Clone(sides)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			began := time.Now()
			for range perRound {
				get(s.url, s.enc, s.want)
			}
			s.per = append(s.per, time.Since(began)/time.Duration(perRound))
		}
	}
	median := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	m := scrapeHTTP{Bytes: len(text), GzipBytes: len(gz), Rounds: rounds, PerRound: perRound,
		Identity: median(sides[0].per), IdentityFloor: median(sides[1].per), Gzip: median(sides[2].per), GzipFloor: median(sides[3].per)}
	m.IdentityRatio = float64(m.Identity) / float64(m.IdentityFloor)
	m.GzipRatio = float64(m.Gzip) / float64(m.GzipFloor)
	return m
}

func (m scrapeHTTP) String() string {
	return fmt.Sprintf("scrape over loopback HTTP, 8 GPUs x 4 processes, %d rounds x %d requests, medians:\n"+
		"identity (%d bytes): exporter %v, net/http %v, ratio %.2fx\n"+
		"gzip (%d bytes): exporter %v, net/http %v, ratio %.2fx",
		m.Rounds, m.PerRound, m.Bytes, m.Identity, m.IdentityFloor, m.IdentityRatio, m.GzipBytes, m.Gzip, m.GzipFloor, m.GzipRatio)
}

// TestScrapeOverHTTP measures both ratios. scripts/bench-scrape.sh runs it
// long (GPUWATCH_BENCH_ROUNDS) and holds the bound GPUWATCH_BENCH_MAX_RATIO;
// a plain test run measures briefly and prints the figures.
func TestScrapeOverHTTP(t *testing.T) {
	rounds, perRound := 5, 20
	if v, err := strconv.Atoi(os.Getenv("GPUWATCH_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds, perRound = v, 200
	}
	m := measureScrapeHTTP(t, rounds, perRound)
	t.Log(m.String())
	fmt.Println(m.String())
	if path := os.Getenv("GPUWATCH_BENCH_WRITE_DOC"); path != "" {
		if err := writeDocRow(path, m, os.Getenv("GPUWATCH_BENCH_LOAD")); err != nil {
			t.Fatal(err)
		}
	}
	if max, err := strconv.ParseFloat(os.Getenv("GPUWATCH_BENCH_MAX_RATIO"), 64); err == nil {
		if m.IdentityRatio > max || m.GzipRatio > max {
			t.Errorf("ratios %.2fx (identity) and %.2fx (gzip), want both at most %.2fx", m.IdentityRatio, m.GzipRatio, max)
		}
	}
}

// writeDocRow replaces the generated block of docs/performance.md with the
// row of this run, so the figure there is the one measured.
func writeDocRow(path string, m scrapeHTTP, load string) error {
	us := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e3, 'f', 1, 64) + " µs" }
	row := fmt.Sprintf("| scrape of 8 GPUs × 4 processes over loopback HTTP, the exporter's whole serving stack against a bare "+
		"net/http server sending the same bytes, interleaved, medians of %d rounds × %d requests | identity (%s bytes): %s against %s, **%.2f×**; "+
		"gzip (%s bytes): %s against %s, **%.2f×** (target ≤ 1.2× each; 1-minute load %s) | `scripts/bench-scrape.sh` (`TestScrapeOverHTTP`) |\n",
		m.Rounds, m.PerRound, testtool.Thousands(m.Bytes), us(m.Identity), us(m.IdentityFloor), m.IdentityRatio,
		testtool.Thousands(m.GzipBytes), us(m.Gzip), us(m.GzipFloor), m.GzipRatio, load)
	return testtool.ReplaceDocBlock(path, "bench-scrape", "| what | figure | how |\n|---|---|---|\n"+row)
}
