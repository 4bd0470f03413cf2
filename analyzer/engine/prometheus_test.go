package engine

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// needProm skips (or, under CI, fails) when Prometheus is not installed.
func needProm(t testing.TB) {
	t.Helper()
	if promAvailable() {
		return
	}
	testtool.Missing(t, "prometheus or promtool not installed; .ci/run installs them")
}

// startPrometheus backfills the OpenMetrics file with promtool and serves
// the blocks with a real Prometheus on a free local port.
func startPrometheus(t testing.TB, openMetrics string) promServer {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	if err := promtoolBlocks(openMetrics, data); err != nil {
		t.Fatal(err)
	}
	t.Logf("promtool backfill in %s", time.Since(start).Round(time.Millisecond))
	return servePrometheus(t, data)
}

// promtoolBlocks backfills the OpenMetrics file into TSDB blocks under data
// with promtool.
func promtoolBlocks(openMetrics, data string) error {
	out, err := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics",
		// Without it 2.42 rereads the whole file for every 2h block.
		"--max-block-duration=256h", openMetrics, data).CombinedOutput()
	if err != nil {
		return fmt.Errorf("promtool create-blocks-from: %w\n%s", err, tail(out))
	}
	return nil
}

// promServer is a real Prometheus the test started.
type promServer struct {
	url string
	pid int
}

// cpu is the server's CPU time so far.
func (p promServer) cpu() time.Duration { return testtool.ProcessCPU(p.pid) }

// servePrometheus serves the TSDB blocks in data with a real Prometheus on
// a free local port.
func servePrometheus(t testing.TB, data string) promServer {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+data,
		"--storage.tsdb.retention.time=100y", "--web.listen-address="+addr, "--query.max-samples=500000000")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus not ready at %s: %v\n%s", url, err, tail(b))
		}
		time.Sleep(200 * time.Millisecond)
	}
	return promServer{url: url, pid: cmd.Process.Pid}
}

func tail(b []byte) string {
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// TestCorpusPrometheusMatchesEmbedded analyzes the corpus through a real
// Prometheus' HTTP API and requires the findings of the embedded path. The
// Prometheus serves a snapshot of the embedded store's blocks (the same
// TSDB format and library version): the week is written once, not again as
// OpenMetrics text for promtool to parse (the field corpora and the 10,000
// GPU cycle go that way).
func TestCorpusPrometheusMatchesEmbedded(t *testing.T) {
	needProm(t)
	f := getFixture(t)
	data := filepath.Join(t.TempDir(), "data")
	start := time.Now()
	if err := f.native.TSDB().Snapshot(data, true); err != nil {
		t.Fatalf("snapshot of the embedded store: %v", err)
	}
	t.Logf("snapshot of the embedded store in %s", time.Since(start).Round(time.Millisecond))
	url := servePrometheus(t, data).url
	c, err := promapi.New(url, promapi.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	viaProm := analyze(t, c, f.c)
	viaEmb := analyze(t, f.native, f.c)
	if d := diffFindings(viaEmb, viaProm); d != "" {
		t.Errorf("Prometheus and embedded findings differ:\n%s", d)
	}
	sc := evaluate(t, f.c.sc.ExpectationsAt(f.c.origin), viaProm, nil)
	t.Log(table(sc))
	check(t, sc)
	_ = context.Background
}

// diffFindings compares two finding lists: same keys, spans, severities and
// actions; numbers equal to within rounding (Prometheus 2.x and 3.x sum
// floats in different orders).
func diffFindings(a, b []finding.Finding) string { return diffFindingsWithin(a, b, 0) }

// diffFindingsWithin lets spans differ by up to tol: VictoriaMetrics leaves
// out a sample that sits exactly on a range's left edge where the embedded
// engine (like Prometheus 2.x) keeps it, so a holder's first scrape can move
// to the next step; the numbers may then differ by that scrape's share.
func diffFindingsWithin(a, b []finding.Finding, tol time.Duration) string {
	idx := func(fs []finding.Finding) map[string]finding.Finding {
		m := map[string]finding.Finding{}
		for _, f := range fs {
			m[f.Key()] = f
		}
		return m
	}
	ma, mb := idx(a), idx(b)
	var out string
	for k, x := range ma {
		y, ok := mb[k]
		if !ok {
			out += fmt.Sprintf("only embedded: %s\n", k)
			continue
		}
		closeTo := func(p, q time.Time) bool { return p.Sub(q).Abs() <= tol }
		same := func(p, q float64) bool {
			return near(p, q) || tol > 0 && math.Abs(p-q) <= 0.05*math.Max(1, math.Abs(p))
		}
		if !closeTo(x.Start, y.Start) || !closeTo(x.End, y.End) || x.Severity != y.Severity || x.Action != y.Action ||
			len(x.GPUs) != len(y.GPUs) || !same(x.WastedGPUHours, y.WastedGPUHours) {
			out += fmt.Sprintf("%s: embedded %s..%s %.3f GPUh, prometheus %s..%s %.3f GPUh\n", k,
				x.Start.Format(time.RFC3339), x.End.Format(time.RFC3339), x.WastedGPUHours,
				y.Start.Format(time.RFC3339), y.End.Format(time.RFC3339), y.WastedGPUHours)
		}
		for ek, ev := range x.Evidence {
			if !same(ev, y.Evidence[ek]) {
				out += fmt.Sprintf("%s: evidence %s embedded %v prometheus %v\n", k, ek, ev, y.Evidence[ek])
			}
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			out += fmt.Sprintf("only prometheus: %s\n", k)
		}
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 0.01*math.Max(1, math.Abs(a)) }
