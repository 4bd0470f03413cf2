package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

const scenario = `
name: agent-test
fleet:
  - hostname: node-1
    model: A100-SXM4-80GB
    gpus: 2
workloads:
  - {id: "77", user: ann, team: nlp, node: node-1, gpus: [0], start: 10m, duration: 5h, behaviour: cpu_only, expect: [cpu_only]}
  - {id: "78", user: bob, team: cv, node: node-1, gpus: [1], start: 0s, duration: 5h, behaviour: training}
`

// The single-node path: the collector's OnCollect feeds the embedded store
// (thinned to the storage interval) and analyzer cycles over it find the
// job that never used its GPU, and only that one.
func TestCollectorFeedsCycles(t *testing.T) {
	t.Parallel()
	sc, err := sim.ParseScenario("agent-test.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := &simload.Clock{}
	clock.Set(origin)
	src, err := sim.New(sc, sim.Options{Seed: 1, Clock: clock, Node: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := store.Open(t.TempDir() + "/state.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logger := slog.New(slog.DiscardHandler)
	in := NewIngest(db, 30*time.Second, logger)
	col, err := collector.New(collector.Options{Source: src, Interval: 10 * time.Second, Clock: clock, Logger: logger, OnCollect: in.OnCollect})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Querier: db, Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var first time.Time
	for off := time.Duration(0); off <= 3*time.Hour; off += 10 * time.Second {
		clock.Set(origin.Add(off))
		if _, err := col.CollectOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if off%(5*time.Minute) != 0 || off == 0 {
			continue
		}
		res, err := eng.Cycle(ctx, origin.Add(off))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Findings {
			if f.Job != "77" || f.Pattern != schema.CPUOnly {
				t.Fatalf("unexpected finding %s on %s", f.Pattern, f.Job)
			}
			if first.IsZero() {
				first = origin.Add(off)
			}
		}
	}
	// The job starts at 0:10 and the threshold is 2h of idleness.
	if first.IsZero() || first.Before(origin.Add(2*time.Hour+10*time.Minute)) || first.After(origin.Add(2*time.Hour+20*time.Minute)) {
		t.Fatalf("cpu_only first reported at %v, want shortly after 2:10", first)
	}
	// One sample in 30s reached the store, not one in 10s.
	v, err := db.Query(ctx, `count_over_time(`+schema.GPUUtil.Name+`{gpu="1"}[10m])`, origin.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || vec[0].Value != 20 {
		t.Errorf("stored samples in 10 minutes: %v, want 20", v)
	}
}

// Run wires the exporter, the store and the analyzer, and stops cleanly.
func TestRunStartsAndStops(t *testing.T) {
	t.Parallel()
	app := kingpin.New("agent-test", "")
	exp := cli.Register(app)
	if _, err := app.Parse([]string{"--source=sim", "--web.listen-address=127.0.0.1:0", "--collect-interval=100ms"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Exporter: exp, TSDBDir: filepath.Join(dir, "tsdb"), StatePath: filepath.Join(dir, "gpuwatch.db"), StoreInterval: 100 * time.Millisecond, Version: "test"})
	}()
	// Wait until a collection is committed (the TSDB writes each commit to
	// its write-ahead log), not for a fixed time: a loaded machine under
	// -race may take seconds for the first collection.
	testtool.Eventually(t, 60*time.Second, "a collection in the write-ahead log", func() (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("agent stopped early: %v", err)
		default:
		}
		if _, err := os.Stat(filepath.Join(dir, "gpuwatch.db")); err != nil {
			return false, nil
		}
		segments, err := filepath.Glob(filepath.Join(dir, "tsdb", "wal", "[0-9]*"))
		if err != nil {
			return false, err
		}
		for _, s := range segments {
			if fi, err := os.Stat(s); err == nil && fi.Size() > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("agent: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("agent did not stop")
	}
	db, err := embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	v, err := db.Query(context.Background(), "count("+schema.GPUUtil.Name+")", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if vec, ok := v.(model.Vector); !ok || len(vec) != 1 || vec[0].Value < 1 {
		t.Errorf("no GPU series stored: %v", v)
	}
}
