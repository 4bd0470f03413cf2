package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

const corpusPath = "../../exporter/sim/scenarios/corpus.yaml"

// corpusOrigin is used when the corpus file sets none: a fixed instant keeps
// the replay, and so the test, deterministic.
var corpusOrigin = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

const corpusSeed = 42

// corpusConfig is the corpus site's analyzer configuration: the defaults,
// plus the run-time limits its operators set per kind (a training
// partition's 48 hours for batch jobs, a day for sessions). gpuwatch
// builds in none; the corpus' overlong jobs are labelled against these.
func corpusConfig() config.Config {
	c := config.Default()
	c.Patterns.Overlong.MaxRuntime[schema.KindBatch] = config.Duration(48 * time.Hour)
	c.Patterns.Overlong.MaxRuntime[schema.KindInteractive] = config.Duration(24 * time.Hour)
	return c
}

type corpus struct {
	sc     *sim.Scenario
	origin time.Time
	span   time.Duration
}

func loadCorpus(t testing.TB) corpus {
	t.Helper()
	sc, err := sim.LoadScenario(corpusPath)
	if err != nil {
		t.Fatalf("load corpus: %v", err)
	}
	origin := sc.Origin
	if origin.IsZero() {
		origin = corpusOrigin
	}
	return corpus{sc: sc, origin: origin, span: 168 * time.Hour}
}

// fixture is one replay of the corpus, shared by every test of the
// package: the gpuwatch-format store, the stock dcgm-exporter-format store
// (Hostname, no gpuwatch_* series, no profiling fields) and the DCP-format
// store, also in a real VictoriaMetrics (a real Prometheus serves a snapshot
// of the gpuwatch-format store: TestCorpusPrometheusMatchesEmbedded).
type fixture struct {
	c      corpus
	native *embedded.DB
	// stock is dcgm-exporter 3.x's default counter set (no power limit, no
	// profiling activity), Hostname, 30 s scrapes.
	stock *embedded.DB
	// dcp is its DCP set (graphics engine, tensor and DRAM activity; no SM
	// activity, no power limit), hostname, honor_labels: false with the
	// exporter pod replaced every 11 hours, 60 s scrapes and a 40-minute
	// exporter outage.
	dcp *embedded.DB
	// vm holds the dcp variant in a real VictoriaMetrics, when installed.
	vm  *victoria
	err error
}

// Formats of the stock variants.
var (
	stockFormat = simload.Format{Stock: true, Counters: simload.DCGMDefault}
	dcpFormat   = simload.Format{Stock: true, Counters: simload.DCGMDCP, Host: schema.LabelHostname,
		HonorLabelsFalse: true, ExporterRestart: 11 * time.Hour, Interval: time.Minute,
		Outages: []simload.Window{{From: corpusOrigin.Add(50 * time.Hour), To: corpusOrigin.Add(50*time.Hour + 40*time.Minute)}}}
)

var (
	fixOnce sync.Once
	fix     fixture
	fixDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fix.vm != nil {
		fix.vm.stop()
	}
	if fix.native != nil {
		fix.native.Close()
		fix.stock.Close()
		fix.dcp.Close()
	}
	if fixDir != "" {
		os.RemoveAll(fixDir)
	}
	os.Exit(code)
}

func promAvailable() bool {
	_, e1 := exec.LookPath("promtool")
	_, e2 := exec.LookPath("prometheus")
	return e1 == nil && e2 == nil
}

func getFixture(t testing.TB) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("replays a simulated week of the corpus")
	}
	if testtool.Race {
		// The week's replay is the simulator writing the TSDB (both
		// race-checked in their own packages); under the race detector it
		// takes the better part of an hour on two cores.
		t.Skip("the corpus runs without -race: scripts/test.sh runs TestCorpus* in its own step")
	}
	fixOnce.Do(func() {
		fix.c = loadCorpus(t)
		dir, err := os.MkdirTemp("", "gpuwatch-corpus-")
		if err != nil {
			fix.err = err
			return
		}
		fixDir = dir
		withVM := vmAvailable() || os.Getenv("CI") != ""
		start := time.Now()
		r, err := corpusReplay(withVM)
		if err != nil {
			fix.err = err
			return
		}
		cached, err := testtool.CachedReplay(t, r, dir, func(dir string) error { return replayCorpus(t, fix.c, dir, withVM) })
		if err != nil {
			fix.err = err
			return
		}
		fix.err = openCorpus(t, dir, withVM)
		how := "replayed"
		if cached {
			how = "from the replay cache"
		}
		t.Logf("%s (%s at 30s) %s in %s", fix.c.sc.Name, fix.c.span, how, time.Since(start).Round(time.Millisecond))
	})
	if fix.err != nil {
		t.Fatalf("corpus fixture: %v", fix.err)
	}
	return &fix
}

// corpusReplay is what generates the corpus week's stores, for the replay
// cache: the simulator and the stores' code, the scenario, this file's
// formats and seed, and the VictoriaMetrics binary written to.
func corpusReplay(withVM bool) (testtool.Replay, error) {
	r := testtool.Replay{Name: "corpus-week",
		Packages: []string{"github.com/gpuwatch/gpuwatch/analyzer/internal/simload", "github.com/gpuwatch/gpuwatch/analyzer/query/embedded"},
		Files:    []string{"exporter/sim/scenarios/corpus.yaml", "analyzer/engine/corpus_test.go", "analyzer/engine/victoria_test.go"},
		Extra:    fmt.Sprintf("seed %d, 30s, victoria-metrics %v", corpusSeed, withVM)}
	if withVM {
		vm, err := exec.LookPath("victoria-metrics")
		if err != nil {
			return r, err
		}
		r.Files = append(r.Files, vm)
	}
	return r, nil
}

// replayCorpus writes the corpus week into dir: the three embedded stores
// and, withVM, a VictoriaMetrics' data, each closed when it returns.
func replayCorpus(t testing.TB, c corpus, dir string, withVM bool) error {
	var dbs [3]*embedded.DB
	for i, name := range []string{"native", "stock", "dcp"} {
		db, err := embedded.Open(filepath.Join(dir, name), embedded.Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		dbs[i] = db
	}
	ctx := context.Background()
	na, sa, da := dbs[0].Appender(), dbs[1].Appender(), dbs[2].Appender()
	// The DCP-formatted collections go to the embedded store and, when
	// it runs, VictoriaMetrics: the format is applied once for both.
	dcpSinks := []simload.Sink{func(ts time.Time, f []*dto.MetricFamily) error {
		return da.AppendFamilies(ctx, ts, f)
	}}
	var vm *victoria
	if withVM {
		var err error
		if vm, err = startVictoria(t, dir); err != nil {
			return err
		}
		defer vm.stop()
		dcpSinks = append(dcpSinks, vm.sink)
	}
	sinks := []simload.Sink{
		func(ts time.Time, f []*dto.MetricFamily) error { return na.AppendFamilies(ctx, ts, f) },
		stockFormat.Sink(func(ts time.Time, f []*dto.MetricFamily) error {
			return sa.AppendFamilies(ctx, ts, f)
		}),
		dcpFormat.Sink(func(ts time.Time, f []*dto.MetricFamily) error {
			for _, s := range dcpSinks {
				if err := s(ts, f); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	// Each store is written in a goroutine of its own: the replay takes
	// about as long as its slowest store instead of all of them together.
	fan := simload.NewFanout(ctx, sinks...)
	_, err := simload.Replay(ctx, c.sc, simload.Options{Seed: corpusSeed, Origin: c.origin, From: 0,
		To: c.span, Resolution: 30 * time.Second}, fan.Sink)
	if cerr := fan.Close(); err == nil {
		err = cerr
	}
	if err == nil && vm != nil {
		if err = vm.ready(); err == nil {
			err = vm.shutdown()
		}
	}
	return err
}

// openCorpus opens the replayed stores in dir for the package's tests and
// serves the VictoriaMetrics data.
func openCorpus(t testing.TB, dir string, withVM bool) error {
	var err error
	for name, db := range map[string]**embedded.DB{"native": &fix.native, "stock": &fix.stock, "dcp": &fix.dcp} {
		if *db, err = embedded.Open(filepath.Join(dir, name), embedded.Options{}); err != nil {
			return err
		}
	}
	if withVM {
		fix.vm, err = startVictoria(t, dir)
	}
	return err
}

// score is precision and recall per pattern against the corpus' ground truth.
type score struct{ tp, fp, fn int }

func (s score) precision() float64 {
	if s.tp+s.fp == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fp)
}

func (s score) recall() float64 {
	if s.tp+s.fn == 0 {
		return 1
	}
	return float64(s.tp) / float64(s.tp+s.fn)
}

// evaluate scores findings against expectations. skip says which expected
// (host|job, pattern) pairs the data format cannot support; they count
// neither way.
func evaluate(t *testing.T, exps []sim.Expectation, fs []finding.Finding, skip func(e sim.Expectation) bool) map[schema.Pattern]*score {
	t.Helper()
	var misses []string
	sc := scoreFindings(exps, fs, skip, &misses)
	sort.Strings(misses)
	for _, m := range misses {
		t.Log(m)
	}
	return sc
}

// scoreFindings is evaluate's rule; misses, when not nil, collects what
// went wrong.
func scoreFindings(exps []sim.Expectation, fs []finding.Finding, skip func(e sim.Expectation) bool, misses *[]string) map[schema.Pattern]*score {
	miss := func(format string, args ...any) {
		if misses != nil {
			*misses = append(*misses, fmt.Sprintf(format, args...))
		}
	}
	got := map[string]map[schema.Pattern]bool{}
	for _, f := range fs {
		k := f.Hostname + "|" + f.Job
		if got[k] == nil {
			got[k] = map[schema.Pattern]bool{}
		}
		got[k][f.Pattern] = true
	}
	sc := map[schema.Pattern]*score{}
	for _, p := range schema.Patterns {
		sc[p] = &score{}
	}
	known := map[string]bool{}
	for _, e := range exps {
		k := e.Hostname + "|" + e.Job
		known[k] = true
		if skip != nil && skip(e) {
			continue
		}
		want := map[schema.Pattern]bool{}
		for _, p := range e.Patterns {
			want[schema.Pattern(p)] = true
		}
		for _, p := range schema.Patterns {
			switch {
			case want[p] && got[k][p]:
				sc[p].tp++
			case want[p]:
				sc[p].fn++
				miss("missed %s on %s (%s)", p, k, e.Behaviour)
			case got[k][p]:
				sc[p].fp++
				miss("false %s on %s (%s)", p, k, e.Behaviour)
			}
		}
	}
	for _, f := range fs {
		if !known[f.Hostname+"|"+f.Job] {
			sc[f.Pattern].fp++
			miss("false %s on an allocation outside the corpus: %s", f.Pattern, f.Key())
		}
	}
	return sc
}

// table prints the scores; a pattern with no labelled case and no finding
// is not scored (n/a), so an empty row never reads as a perfect one.
func table(sc map[schema.Pattern]*score) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-18s %4s %4s %4s %9s %6s\n", "pattern", "tp", "fp", "fn", "precision", "recall")
	for _, p := range schema.Patterns {
		s := sc[p]
		if s.tp+s.fp+s.fn == 0 {
			fmt.Fprintf(&b, "%-18s %4d %4d %4d %9s %6s\n", p, 0, 0, 0, "n/a", "n/a")
			continue
		}
		fmt.Fprintf(&b, "%-18s %4d %4d %4d %9.3f %6.3f\n", p, s.tp, s.fp, s.fn, s.precision(), s.recall())
	}
	return b.String()
}

// check applies the acceptance thresholds: precision 1.0 for patterns whose
// default action reclaims (or kills), 0.97 elsewhere; recall 0.95.
func check(t *testing.T, sc map[schema.Pattern]*score) {
	t.Helper()
	for _, p := range schema.Patterns {
		s := sc[p]
		minP := 0.97
		if a := detect.DefaultAction(p); a == schema.ActionReclaim || a == schema.ActionKill {
			minP = 1
		}
		if s.precision() < minP {
			t.Errorf("%s: precision %.3f below %.2f", p, s.precision(), minP)
		}
		if s.recall() < 0.95 {
			t.Errorf("%s: recall %.3f below 0.95", p, s.recall())
		}
	}
}

func analyze(t testing.TB, q query.Querier, c corpus) []finding.Finding {
	t.Helper()
	e, err := New(Options{Querier: q, Config: corpusConfig()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	fs, err := e.Analyze(context.Background(), c.origin, c.origin.Add(c.span))
	if err != nil {
		t.Fatalf("analyze: %v", err)
	}
	t.Logf("analyzed %s in %s: %d findings", c.span, time.Since(start).Round(time.Millisecond), len(fs))
	return fs
}

func TestCorpusPrecisionRecall(t *testing.T) {
	f := getFixture(t)
	exps := f.c.sc.ExpectationsAt(f.c.origin)
	if len(exps) < 120 {
		t.Fatalf("corpus has %d allocations, want at least 120", len(exps))
	}
	fs := analyze(t, f.native, f.c)
	sc := evaluate(t, exps, fs, nil)
	t.Log(table(sc))
	check(t, sc)
	checkHours(t, f.c, exps, fs, nil)
}

// TestCorpusStockDCGM analyzes the corpus as a stock dcgm-exporter 3.x with
// its default counter set publishes it: no gpuwatch_* series (so no
// allocation_info and no orphan detection), Hostname instead of hostname,
// no power limit and no DCGM_FI_PROF_* activity. Hung collectives are found
// from util against each GPU's idle power. Kinds come from name patterns, so
// an interactive Slurm job whose name says nothing can not be told from
// batch: those and the orphans are left out of the score, and said so.
func TestCorpusStockDCGM(t *testing.T) {
	f := getFixture(t)
	scoreStock(t, f.stock, f.c)
}

// TestCorpusStockDCP analyzes the DCP counter set (graphics engine, tensor
// and DRAM activity; no SM activity, no power limit) scraped every 60 s
// with honor_labels: false, so holders sit in exported_* labels and pod
// names the exporter, which is replaced every 11 hours, and with an
// exporter outage.
func TestCorpusStockDCP(t *testing.T) {
	f := getFixture(t)
	fs := scoreStock(t, f.dcp, f.c)
	for _, x := range fs {
		if strings.Contains(x.Job, "dcgm-exporter") {
			t.Errorf("the exporter's own pod taken for a job: %s", x.Key())
		}
	}
}

func scoreStock(t *testing.T, q query.Querier, c corpus) []finding.Finding {
	t.Helper()
	exps := c.sc.ExpectationsAt(c.origin)
	fs := analyze(t, q, c)
	for _, x := range fs {
		if x.Hostname == "" {
			t.Fatalf("finding without hostname: %+v", x)
		}
	}
	skipped := 0
	skip := func(e sim.Expectation) bool {
		guess, _ := detect.GuessKind(podOf(e), "")
		return e.Behaviour == string(sim.Orphan) || guess != e.Kind && e.Kind == schema.KindInteractive
	}
	sc := evaluate(t, exps, fs, func(e sim.Expectation) bool {
		if skip(e) {
			skipped++
			return true
		}
		return false
	})
	t.Logf("stock format: %d allocations out of scope (orphans need gpuwatch_process_orphaned; kind not derivable from names)", skipped)
	if skipped > 16 {
		t.Errorf("%d allocations skipped, the stock check covers too little", skipped)
	}
	t.Log(table(sc))
	check(t, sc)
	checkHours(t, c, exps, fs, skip)
	return fs
}

func podOf(e sim.Expectation) string {
	if e.Scheduler == "kubernetes" {
		if _, pod, ok := strings.Cut(e.Job, "/"); ok {
			return pod
		}
	}
	return ""
}

// TestCorpusCyclesMatchOneShot runs the daemon's path, one incremental
// cycle per step with its state in the store, over the corpus' first two
// days and requires the one-shot analysis' findings over the same window.
// Cumulative patterns may show while a job's history is short (a service's
// first night looks light); those are never reclaim-level.
func TestCorpusCyclesMatchOneShot(t *testing.T) {
	f := getFixture(t)
	span := 48 * time.Hour
	e, err := New(Options{Querier: f.native, Store: openStore(t), Config: corpusConfig(), WarmUp: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fromCycles := map[string]finding.Finding{}
	for at := f.c.origin.Add(5 * time.Minute); !at.After(f.c.origin.Add(span)); at = at.Add(5 * time.Minute) {
		res, err := e.Cycle(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		if res.Queries != features.Queries {
			t.Fatalf("cycle at %s: %d queries", at, res.Queries)
		}
		for _, x := range res.Findings {
			fromCycles[x.Key()] = x
		}
	}
	oneShot, err := e.Analyze(ctx, f.c.origin, f.c.origin.Add(span))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, x := range oneShot {
		want[x.Key()] = true
		if _, ok := fromCycles[x.Key()]; !ok {
			t.Errorf("one-shot finding %s never reported by a cycle", x.Key())
		}
	}
	for k, x := range fromCycles {
		if want[k] {
			continue
		}
		if !detect.Cumulative(x.Pattern) || x.Action == schema.ActionReclaim || x.Action == schema.ActionKill {
			t.Errorf("cycle finding %s (%s) not in the one-shot analysis", k, x.Action)
		} else {
			t.Logf("transient %s in cycles (history still short)", k)
		}
	}
	t.Logf("%d one-shot findings, %d distinct cycle findings over %s", len(oneShot), len(fromCycles), span)
}
