package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// noise is a deterministic value in [-1, 1) for GPU g at step i on channel ch.
func noise(g, i, ch int) float64 {
	x := uint64(g)*0x9e3779b97f4a7c15 ^ uint64(i)*0xbf58476d1ce4e5b9 ^ uint64(ch)*0x94d049bb133111eb
	x ^= x >> 31
	x *= 0xd6e8feb96aa77a4d
	x ^= x >> 29
	return float64(x>>11)/float64(1<<52) - 1
}

// fleetValues are one GPU's readings at step i as a real exporter reports
// them: SM activity a noisy ratio, util whole percent, framebuffer whole
// MiB; held reports whether a job holds the GPU (fleetSample's job).
func fleetValues(g, i int, off time.Duration) (held bool, vals [4]float64) {
	if off%(24*time.Hour) < 30*time.Minute {
		return false, [4]float64{0, 0, 0, 81559}
	}
	x := float64(off%(24*time.Hour)) / float64(24*time.Hour)
	var sm, fb float64
	switch g % 4 {
	case 0:
		sm, fb = 0.1+0.5*(0.5-0.5*math.Cos(2*math.Pi*x)), 20000
	case 1:
		sm, fb = 0.05, 5000
	default:
		sm, fb = 0.8, 60000
	}
	sm = math.Max(0, sm+0.02*noise(g, i, 1))
	fb = math.Round(fb + 200*noise(g, i, 2))
	util := math.Max(0, math.Min(100, math.Round(sm*110+2*noise(g, i, 3))))
	return true, [4]float64{sm, util, fb, 81559 - fb}
}

// writeFleetBlocks writes n GPUs × span at step of the series the planner
// reads (SM activity, util, framebuffer used and free) straight into TSDB
// blocks under dir, one block per day, two days at a time; withRecorded
// adds the planner's recorded figures of the same samples (appendRecorded).
// It returns the raw samples written.
func writeFleetBlocks(t testing.TB, dir string, n int, from time.Time, span, step time.Duration, rec fleetRecorded) int64 {
	t.Helper()
	metrics := []*schema.Metric{schema.ProfSMActive, schema.GPUUtil, schema.FBUsed, schema.FBFree}
	days := int(span / (24 * time.Hour))
	var total int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, days)
	sem := make(chan struct{}, 2)
	for d := 0; d < days; d++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			k, err := writeDay(dir, metrics, n, from, time.Duration(d)*24*time.Hour, span, step, rec)
			if err != nil {
				errs <- fmt.Errorf("day %d: %w", d, err)
				return
			}
			mu.Lock()
			total += k
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if rec == withRecorded {
		if err := writeLastRecorded(dir, n, from, span, step); err != nil {
			t.Fatal(err)
		}
	}
	return total
}

func writeDay(dir string, metrics []*schema.Metric, n int, from time.Time, day, span, step time.Duration, recorded fleetRecorded) (int64, error) {
	ctx := context.Background()
	w, err := tsdb.NewBlockWriter(slog.New(slog.NewTextHandler(io.Discard, nil)), dir, (24 * time.Hour).Milliseconds())
	if err != nil {
		return 0, err
	}
	defer w.Close()
	type series struct {
		ref storage.SeriesRef
		l   labels.Labels
	}
	// Keyed by GPU, metric and whether a job holds it (a GPU's job is the
	// same all day).
	refs := make([]*series, 2*n*len(metrics))
	var total int64
	b := labels.NewScratchBuilder(8)
	app := w.Appender(ctx)
	var rec *recorder
	if recorded == withRecorded {
		rec = newRecorder(w, n, from, span, step)
	}
	for off := day; off < day+24*time.Hour; off += step {
		// The recorded points of the hour before, at its end (none at the
		// fleet's start, where no hour came before), in time order with
		// the raw samples: the head takes nothing far behind its newest.
		if rec != nil && off%time.Hour == 0 && off > 0 {
			if err := rec.boundary(ctx, off); err != nil {
				return 0, err
			}
		}
		i := int(off / step)
		ts := from.Add(off).UnixMilli()
		for g := 0; g < n; g++ {
			held, vals := fleetValues(g, i, off)
			for mi, m := range metrics {
				k := (g*len(metrics) + mi) * 2
				if held {
					k++
				}
				s := refs[k]
				if s == nil {
					host, idx := fmt.Sprintf("node-%04d", g/8), g%8
					b.Reset()
					b.Add("__name__", m.Name)
					b.Add(schema.LabelUUID, fmt.Sprintf("GPU-%s-%d", host, idx))
					b.Add(schema.LabelGPU, strconv.Itoa(idx))
					b.Add(schema.LabelHostname, host)
					b.Add(schema.LabelModelName, "NVIDIA H100 80GB HBM3")
					if held {
						job, _, _, _ := fleetSample(g, off)
						b.Add(schema.LabelHPCJob, job)
					}
					b.Sort()
					s = &series{l: b.Labels()}
					refs[k] = s
				}
				ref, err := app.Append(s.ref, s.l, ts, vals[mi])
				if err != nil {
					return 0, err
				}
				s.ref = ref
				total++
			}
		}
		if err := app.Commit(); err != nil {
			return 0, err
		}
		app = w.Appender(ctx)
	}
	if _, err := w.Flush(ctx); err != nil {
		return 0, err
	}
	return total, nil
}

// prometheusServer is a real Prometheus serving the blocks under data.
type prometheusServer struct {
	URL string
	cmd *exec.Cmd
}

// startPrometheus serves the blocks under data with the real Prometheus.
// Blocks of a day are the largest it may build, so that it does not spend
// the test compacting them.
func startPrometheus(t testing.TB, data string) *prometheusServer {
	t.Helper()
	prom := testtool.Need(t, "prometheus")
	cfg := filepath.Join(filepath.Dir(data), "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 60s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testtool.FreeAddr(t)
	cmd := exec.Command(prom, "--config.file="+cfg, "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=100y",
		"--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=24h",
		"--web.listen-address="+addr, "--query.max-samples=500000000", "--query.timeout=10m")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return &prometheusServer{URL: url, cmd: cmd}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus not ready")
		}
	}
}

// stop ends the server and waits for it.
func (p *prometheusServer) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// cpu is the server's user and system CPU time so far.
func (p *prometheusServer) cpu() time.Duration { return testtool.ProcessCPU(p.cmd.Process.Pid) }

// execOutput runs a program and returns its standard output.
func execOutput(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	return string(out), err
}

// compactDays merges the blocks under src into one block per UTC day under
// dst, and returns how many it wrote. promtool writes a block for every
// two hours of every rule; a live Prometheus evaluating the rules as data
// arrives keeps them in its head and compacts them into the same larger
// blocks as the raw series, so a plan reads a handful of blocks, not
// hundreds, and so does this one.
func compactDays(t *testing.T, src, dst string) int {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	byDay := map[int64][]string{}
	day := (24 * time.Hour).Milliseconds()
	for _, e := range ents {
		dir := filepath.Join(src, e.Name())
		b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ MinTime int64 }
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatalf("block %s: %v", dir, err)
		}
		d := meta.MinTime - meta.MinTime%day
		byDay[d] = append(byDay[d], dir)
	}
	c, err := tsdb.NewLeveledCompactor(context.Background(), nil, slog.New(slog.DiscardHandler), []int64{day}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, dirs := range byDay {
		if _, err := c.Compact(dst, dirs, nil); err != nil {
			t.Fatalf("compact %d blocks: %v", len(dirs), err)
		}
	}
	return len(byDay)
}

// timedQuerier logs each query's wall time: where a plan's time goes.
type timedQuerier struct {
	t testing.TB
	query.Querier
}

func (q timedQuerier) Query(ctx context.Context, expr string, ts time.Time) (model.Value, error) {
	start := time.Now()
	v, err := q.Querier.Query(ctx, expr, ts)
	q.t.Logf("QUERY %s instant: %s", time.Since(start).Round(time.Millisecond), expr)
	return v, err
}

// ReadSamples passes a remote read on where the wrapped querier has one.
func (q timedQuerier) ReadSamples(ctx context.Context, metric string, start, end time.Time, each func(model.Metric, []model.SamplePair) error) error {
	sr, ok := q.Querier.(query.SampleReader)
	if !ok {
		return errors.ErrUnsupported
	}
	t0 := time.Now()
	err := sr.ReadSamples(ctx, metric, start, end, each)
	q.t.Logf("QUERY %s remote read: %s [%s, %s]", time.Since(t0).Round(time.Millisecond), metric, start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339))
	return err
}

func (q timedQuerier) QueryRange(ctx context.Context, expr string, r query.Range) (model.Value, error) {
	start := time.Now()
	v, err := q.Querier.QueryRange(ctx, expr, r)
	q.t.Logf("QUERY %s range: %s", time.Since(start).Round(time.Millisecond), expr)
	return v, err
}
