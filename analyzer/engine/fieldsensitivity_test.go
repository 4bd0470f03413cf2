package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The borderline site (fieldgen.Borderline) in the two counter sets the
// table reports on: dcgm-exporter's default counters, and its profiling set
// with SM activity (dcp-metrics-included.csv).
var borderlineFormats = []struct {
	name string
	f    fieldgen.Format
}{
	{"default counters", fieldgen.Format{}},
	{"profiling counters with SM activity", fieldgen.Format{SM: true}},
}

// borderlineTable is the sensitivity table of one format of the
// borderline site.
type borderlineTable struct {
	name string
	rows []sensitivityRow
}

// borderlineSet is one format of the borderline site, its steps fetched
// once per test binary and shared by every test that sweeps it.
type borderlineSet struct {
	once  sync.Once
	site  *fieldgen.Site
	cache *stepCache
	err   error
}

var borderlineSets = make([]borderlineSet, len(borderlineFormats))

// borderline replays format i of the site into a scratch store, fetches
// its steps (an analysis under the defaults fills the cache), and drops
// the store: every later analysis of it is detection only.
func borderline(t *testing.T, i int) (*fieldgen.Site, *stepCache) {
	t.Helper()
	if testing.Short() {
		t.Skip("replays 60 hours of the borderline site")
	}
	if testtool.Race {
		// The replay and a hundred analyses take about seven minutes under
		// the race detector on two cores (the engine's concurrency is
		// race-checked by its own tests).
		t.Skip("the borderline site runs without -race: scripts/test.sh runs TestCorpus* in its own step")
	}
	d := &borderlineSets[i]
	d.once.Do(func() {
		start := time.Now()
		bf := borderlineFormats[i]
		d.site = fieldgen.Borderline().For(bf.f)
		dir, err := os.MkdirTemp("", "gpuwatch-borderline-")
		if err != nil {
			d.err = err
			return
		}
		defer os.RemoveAll(dir)
		// The replay is a pure function of fieldgen's code and the format:
		// a second run of the suite reads it from the replay cache.
		r := testtool.Replay{Name: "borderline-" + strings.ReplaceAll(bf.name, " ", "-"),
			Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen", "github.com/gpuwatch/gpuwatch/analyzer/query/embedded"},
			Files:    []string{"analyzer/engine/fieldsensitivity_test.go", "analyzer/engine/fieldcorpus_test.go"},
			Extra:    fmt.Sprintf("fieldgen.Borderline(), seed 11, %+v", bf.f)}
		tsdb := filepath.Join(dir, "tsdb")
		if _, d.err = testtool.CachedReplay(t, r, tsdb, func(tsdb string) error {
			db, err := embedded.Open(tsdb, embedded.Options{})
			if err != nil {
				return err
			}
			err = replaySite(db, d.site, bf.f)
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			return err
		}); d.err != nil {
			return
		}
		db, err := embedded.Open(tsdb, embedded.Options{})
		if err != nil {
			d.err = err
			return
		}
		defer db.Close()
		d.cache = newStepCache(db)
		e, err := d.cache.engine(corpusConfig())
		if err != nil {
			d.err = err
			return
		}
		_, d.err = e.Analyze(context.Background(), fieldOrigin, fieldOrigin.Add(d.site.Span))
		t.Logf("borderline site, %s: replayed and fetched in %s", bf.name, time.Since(start).Round(time.Millisecond))
	})
	if d.err != nil {
		t.Fatalf("borderline site, %s: %v", borderlineFormats[i].name, d.err)
	}
	return d.site, d.cache
}

// borderlineSensitivity scores the borderline site in each format under
// every job's configuration (TestCorpusBorderlinePerPattern judges the defaults
// on it case by case).
func borderlineSensitivity(t *testing.T, jobs []sensitivityJob) []borderlineTable {
	t.Helper()
	var out []borderlineTable
	for i, bf := range borderlineFormats {
		site, cache := borderline(t, i)
		rows := runSensitivity(t, cache, fieldOrigin, fieldOrigin.Add(site.Span), jobs, func(i int, fs []finding.Finding) map[schema.Pattern]string {
			return fieldCells(scoreSite(site, fs))
		})
		out = append(out, borderlineTable{name: bf.name, rows: rows})
	}
	return out
}

// fieldCells is a field score as the table's cells: precision / recall
// per pattern, "–" where the pattern has neither label nor finding.
func fieldCells(s fieldScore) map[schema.Pattern]string {
	out := map[schema.Pattern]string{}
	for _, p := range schema.Patterns {
		n, l := s.findings[string(p)], s.patLabels[string(p)]
		if n == 0 && l == 0 {
			out[p] = "–"
			continue
		}
		prec, rec := 1.0, 1.0
		if n > 0 {
			prec = float64(s.backed[string(p)]) / float64(n)
		}
		if l > 0 {
			rec = float64(s.patFound[string(p)]) / float64(l)
		}
		out[p] = fmt.Sprintf("%.2f / %.2f", prec, rec)
	}
	return out
}
