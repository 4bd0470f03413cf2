// Package simloadtest replays a simulated scenario into an embedded store
// for tests, through the replay cache (testtool.CachedReplay): a scenario
// replayed by a test is a pure function of the scenario, the options and
// the simulator's code, so a second run of the suite on the same code opens
// the stored copy instead of simulating again.
package simloadtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

const originFile = "origin"

// Store replays sc with o into a new embedded store (opened with eo), closed
// when the test ends, and returns it with the source's origin.
func Store(t testing.TB, sc *sim.Scenario, o simload.Options, eo embedded.Options) (*embedded.DB, time.Time) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tsdb")
	build := func(dir string) error { return replay(dir, sc, o, eo) }
	if r, err := key(sc, o, eo); err != nil {
		t.Logf("replay of %s not cached: %v", sc.Name, err)
		err = build(dir)
		if err != nil {
			t.Fatal(err)
		}
	} else if _, err := testtool.CachedReplay(t, r, dir, build); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, originFile))
	if err != nil {
		t.Fatal(err)
	}
	origin, err := time.Parse(time.RFC3339Nano, string(b))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(dir, eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, origin
}

// Parse is sim.ParseScenario of a scenario a test writes out, failing the
// test on an error.
func Parse(t testing.TB, name, doc string) *sim.Scenario {
	t.Helper()
	sc, err := sim.ParseScenario(name, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// Wrap passes a replay's collections through one more stage on their way
// to the store: a counter set (simload.Format's Sink), time-sliced GPUs
// (simload.TimeSliced's), an outage.
type Wrap func(simload.Sink) simload.Sink

// Formatted replays sc with o into a new embedded store, every collection
// passed through wraps in order (the first nearest the store), closed when
// the test ends. It is not cached: a wrap is code, which no key can name;
// Store is the cached way for a replay stored as the simulator writes it.
func Formatted(t testing.TB, sc *sim.Scenario, o simload.Options, wraps ...Wrap) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := into(db, sc, o, wraps); err != nil {
		t.Fatal(err)
	}
	return db
}

// into replays sc into db through wraps and returns the source's origin.
func into(db *embedded.DB, sc *sim.Scenario, o simload.Options, wraps []Wrap) (time.Time, error) {
	ctx := context.Background()
	app := db.Appender()
	sink := simload.Sink(func(ts time.Time, fams []*dto.MetricFamily) error {
		return app.AppendFamilies(ctx, ts, fams)
	})
	for _, w := range wraps {
		sink = w(sink)
	}
	return simload.Replay(ctx, sc, o, sink)
}

func replay(dir string, sc *sim.Scenario, o simload.Options, eo embedded.Options) error {
	db, err := embedded.Open(dir, eo)
	if err != nil {
		return err
	}
	origin, err := into(db, sc, o, nil)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, originFile), []byte(origin.Format(time.RFC3339Nano)), 0o600)
}

// key names everything the replay's output depends on besides the code:
// the scenario as parsed, the options, the store's retention.
func key(sc *sim.Scenario, o simload.Options, eo embedded.Options) (testtool.Replay, error) {
	doc, err := json.Marshal(sc)
	if err != nil {
		return testtool.Replay{}, err
	}
	extra := make([]string, 0, len(o.Extra))
	for _, m := range o.Extra {
		extra = append(extra, m.Name)
	}
	inputs := fmt.Sprintf("%s\nseed %d origin %s from %s to %s resolution %s all %v extra %v retention %s",
		doc, o.Seed, o.Origin.Format(time.RFC3339Nano), o.From, o.To, o.Resolution, o.All, extra, eo.Retention)
	// One name per scenario and options: the cache keeps the last two
	// versions of the code for each, so two replays of one scenario with
	// other options do not push each other out.
	sum := sha256.Sum256([]byte(inputs))
	return testtool.Replay{
		Name:     "scenario-" + sc.Name + "-" + hex.EncodeToString(sum[:4]),
		Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"},
		Extra:    inputs,
	}, nil
}

// Compacted is a store a test fills itself (fill returns the samples it
// wrote), compacted and closed, through the replay cache: a scale test's
// week is written once per version of the code that writes it, and its
// bound stays on what reads it. name and files (the test file holding
// fill) key it besides the embedded store's code. It returns the store's
// folder, the samples written and whether the cache served it.
func Compacted(t testing.TB, name string, files []string, fill func(*embedded.DB) int) (string, int, bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tsdb")
	r := testtool.Replay{Name: name, Files: files, Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"}}
	cached, err := testtool.CachedReplay(t, r, dir, func(dir string) error {
		db, err := embedded.Open(dir, embedded.Options{})
		if err != nil {
			return err
		}
		samples := fill(db)
		if err := db.TSDB().Compact(context.Background()); err != nil {
			db.Close()
			return err
		}
		if err := db.Close(); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, samplesFile), []byte(strconv.Itoa(samples)), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, samplesFile))
	if err != nil {
		t.Fatal(err)
	}
	samples, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return dir, samples, cached
}

const samplesFile = "samples"
