package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// The scale tests' fleets are the same blocks on every run of the same
// code: the 10,000-GPU week alone is 403 million samples, two and a half
// minutes of writing on two cores before a plan that the test times. The
// replay cache (testtool.CachedReplay) keeps them by the hash of what
// writes them, so a second run of the suite copies them and the test's
// time goes to what it measures; a change to the fleet's code, the TSDB
// library (go.sum), the recording rules or the binaries that backfill them
// writes them again.

// fleetFiles are the test files whose code decides the fleet's blocks:
// the samples (fleetValues, fleetSample), the block writer, the recorded
// figures and this file's keys.
var fleetFiles = []string{
	"analyzer/plan/blocks_test.go",
	"analyzer/plan/scale_test.go",
	"analyzer/plan/recordedblocks_test.go",
	"analyzer/plan/fleetcache_test.go",
}

// fleetPackages are the packages of this module whose code the fleet's
// blocks depend on: the label names, and the recorded series' names.
var fleetPackages = []string{
	"github.com/gpuwatch/gpuwatch/schema",
	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly",
}

// fleetReplay is the cache entry of writeFleetBlocks(n, from, span, step, rec).
func fleetReplay(n int, from time.Time, span, step time.Duration, rec fleetRecorded) testtool.Replay {
	kind := "raw"
	if rec == withRecorded {
		kind = "with-recorded"
	}
	return testtool.Replay{
		Name:     fmt.Sprintf("plan-fleet-%d-%s", n, kind),
		Packages: fleetPackages,
		Files:    fleetFiles,
		Extra:    fmt.Sprintf("fleet of %d GPUs from %s over %s at %s, %s", n, from.UTC().Format(time.RFC3339), span, step, kind),
	}
}

// cachedFleetBlocks is writeFleetBlocks through the replay cache: it
// returns a data folder of its own holding the fleet's blocks, the raw
// samples they hold and whether the cache served them.
func cachedFleetBlocks(t testing.TB, n int, from time.Time, span, step time.Duration, rec fleetRecorded) (string, int64, bool) {
	t.Helper()
	// The sample count lies beside the blocks, not among them: the data
	// folder is Prometheus' own.
	dir := filepath.Join(t.TempDir(), "fleet")
	data := filepath.Join(dir, "data")
	countFile := filepath.Join(dir, "samples")
	cached, err := testtool.CachedReplay(t, fleetReplay(n, from, span, step, rec), dir, func(string) error {
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		samples := writeFleetBlocks(t, data, n, from, span, step, rec)
		return os.WriteFile(countFile, []byte(strconv.FormatInt(samples, 10)), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(countFile)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", countFile, err)
	}
	return data, samples, cached
}

// cachedRecordRules is recordRules through the replay cache, for the data
// of cachedFleetBlocks(n, from, span, step, rawOnly) that ps serves: the
// backfill's blocks, compacted by day, are keyed by that fleet, the
// recording rules, promtool and the Prometheus that evaluates them. It
// moves them into data, serves it again and returns the new server.
func cachedRecordRules(t *testing.T, ps *prometheusServer, data string, n int, from time.Time, span, step time.Duration, start, end time.Time) *prometheusServer {
	t.Helper()
	r := fleetReplay(n, from, span, step, rawOnly)
	r.Name = fmt.Sprintf("plan-fleet-%d-rules-backfilled", n)
	r.Packages = append(append([]string(nil), r.Packages...), "github.com/gpuwatch/gpuwatch/rules")
	r.Files = append(append([]string(nil), r.Files...), "analyzer/plan/prometheus_test.go",
		testtool.Need(t, "promtool"), testtool.Need(t, "prometheus"))
	r.Extra += fmt.Sprintf("; group %s backfilled over [%s, %s], lag %s", hourly.Group,
		start.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339), hourly.Lag)
	blocks := filepath.Join(t.TempDir(), "recorded")
	cached, err := testtool.CachedReplay(t, r, blocks, func(string) error {
		backfillRules(t, ps, start, end, blocks)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ps.stop()
	moved := moveBlocks(t, blocks, data)
	t.Logf("RULES %s: %d blocks of the backfill (from the replay cache: %v)", hourly.Group, moved, cached)
	return startPrometheus(t, data)
}
