package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// TestFirstCycleOnAFreshPrometheus: a cycle reads the steps that ended by
// its start's step boundary. Two minutes after the first scrape, that
// boundary predates it: the window is empty while the GPUs are there, and
// the reason must say so (no fault, the next cycle reads them) rather than
// "no data … check the address". A store with no GPU at all still says
// "no data", naming the series and the window it asked about.
func TestFirstCycleOnAFreshPrometheus(t *testing.T) {
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	_, d := engineRig(t, origin, 0, time.Minute) // the first scrape at 00:01
	src := d.Source.(EngineSource)
	src.Where = "the test's store"
	src.Metrics = engine.NewMetrics()
	reason := func(s EngineSource, now time.Time) string {
		t.Helper()
		if _, err := s.Findings(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		c, ok := s.Metrics.LastCoverage()
		if !ok {
			t.Fatal("no coverage observed")
		}
		return c.Reason
	}
	got := reason(src, origin.Add(3*time.Minute))
	for _, w := range []string{"no data yet", "4 GPUs at the test's store", "after this cycle's window (", "to 00:00 UTC), which ended before the first scrape", "next cycle"} {
		if !strings.Contains(got, w) {
			t.Errorf("first cycle's reason lacks %q: %s", w, got)
		}
	}
	if strings.Contains(got, "check the address") {
		t.Errorf("first cycle blames the address while the GPUs are there: %s", got)
	}
	if got := reason(src, origin.Add(7*time.Minute)); strings.Contains(got, "no data") {
		t.Errorf("the next cycle still says no data: %s", got)
	}

	empty, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { empty.Close() })
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Querier: empty, Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	none := EngineSource{Engine: eng, Series: empty, Where: "http://prometheus:9090", Metrics: engine.NewMetrics()}
	got = reason(none, origin.Add(2*time.Minute))
	for _, w := range []string{"no data: no GPU series (DCGM_FI_DEV_FB_USED", "at http://prometheus:9090 from ", "to 00:00 UTC", "check the address"} {
		if !strings.Contains(got, w) {
			t.Errorf("empty store's reason lacks %q: %s", w, got)
		}
	}
}
