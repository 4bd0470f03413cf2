package quickstart

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// mayBeEmpty are the panels ("dashboard uid / panel title") whose queries
// may return nothing after the quickstart, each with the reason. Every query
// of every other panel must return data.
var mayBeEmpty = map[string]string{
	// Faults: a healthy node has none. test/e2e-alerts shows both with data
	// under the throttling-xid scenario.
	"gpuwatch-node / XID errors":  "no XID on a healthy node (test/e2e-alerts has them)",
	"gpuwatch-node / XID history": "no XID on a healthy node (test/e2e-alerts has them)",
	// The capacity planner refuses to plan on less than a day of history
	// (--plan.min-history), and the quickstart's fleet is hours old: no plan,
	// so none of its panels has data yet, its window panels included (the
	// Planner tab says why). analyzer/plan's surfaces test runs these panels'
	// queries on a real plan.
	"gpuwatch-planner / Window":                             plannerHistory,
	"gpuwatch-planner / Window ended":                       plannerHistory,
	"gpuwatch-planner / Forecast peak and coverage by pool": plannerHistory,
	"gpuwatch-planner / GPUs held":                          plannerHistory,
	"gpuwatch-planner / GPUs held and needed by pool":       plannerHistory,
	"gpuwatch-planner / GPUs held and needed by team":       plannerHistory,
	"gpuwatch-planner / GPUs needed":                        plannerHistory,
	"gpuwatch-planner / GPUs of unknown demand":             plannerHistory,
	"gpuwatch-planner / GPUs that could be freed":           plannerHistory,
	"gpuwatch-planner / Pools":                              plannerHistory,
	"gpuwatch-planner / Teams":                              plannerHistory,
	// Per-holder use is published for shared GPUs; the quickstart's
	// simulated fleet (the default scenario) time-slices none.
	"gpuwatch-node / gpuwatch_holder_sm_utilization_ratio":      noSharedGPU,
	"gpuwatch-node / gpuwatch_holder_memory_utilization_ratio":  noSharedGPU,
	"gpuwatch-node / gpuwatch_holder_encoder_utilization_ratio": noSharedGPU,
	"gpuwatch-node / gpuwatch_holder_decoder_utilization_ratio": noSharedGPU,
	"gpuwatch-node / gpuwatch_holder_gpu_memory_bytes":          noSharedGPU,
}

const noSharedGPU = "the quickstart's simulated fleet shares no GPU; exporter/sim's shared-timeslice scenario publishes these (TestSharedGPUPublishesEachHoldersUse)"

const plannerHistory = "the planner plans on a day of history at least, the quickstart's fleet is hours old (analyzer/plan's surfaces test has them)"

// panelDeadline bounds the wait for every panel's data: the analyzers'
// first findings need two 30 s steps of scrapes, then a cycle.
const panelDeadline = 3 * time.Minute

func TestQuickstartDashboardsHaveData(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test of the quickstart's Prometheus (about two minutes); run without -short")
	}
	promBin := testtool.Need(t, "prometheus")
	root := repoRoot(t)
	blocks := docBlocks(t, root)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exporter := testtool.Binary(t, "cmd/gpuwatch-exporter")
	analyzer := testtool.Binary(t, "cmd/gpuwatch-analyzer")

	var delivered atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		delivered.Add(1)
	}))
	defer hook.Close()

	const password = "a password made up for this test"
	tg := targets{exporter: testtool.FreeAddr(t), analyzer: testtool.FreeAddr(t), protected: testtool.FreeAddr(t),
		passwordFile: writeFile(t, filepath.Join(dir, "analyzer.password"), password)}
	webConfig, user := writeWebConfig(t, dir, blocks[blockWebConfig], password)
	promAddr := testtool.FreeAddr(t)
	start(ctx, t, dir, "prometheus", promBin, "--config.file="+writePrometheusConfig(t, root, dir, blocks, tg, user),
		"--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address="+promAddr)
	waitHTTP(ctx, t, "http://"+promAddr+"/-/ready", http.StatusOK)

	start(ctx, t, dir, "exporter", exporter, "--source=sim", "--sim.scenario="+writeScenario(t, root, dir),
		"--web.listen-address="+tg.exporter)
	// The analyzer as the quickstart's section 3 runs it, with the
	// thresholds and schedule of a test.
	args := []string{"analyzer", "--policy.file=" + writePolicy(t, root, dir, hook.URL),
		"--prometheus.url=http://" + promAddr, "--analyzer.config=" + writeFile(t, filepath.Join(dir, "analyzer.yml"), analyzerConfig),
		// A cycle per step, as the quickstart's 5 min each: a cycle that
		// finds no new step publishes no open findings.
		"--schedule=@every 30s"}
	start(ctx, t, dir, "analyzer", analyzer, append(args, "--storage.path="+filepath.Join(dir, "gpuwatch.db"),
		"--web.listen-address="+tg.analyzer)...)
	start(ctx, t, dir, "analyzer-protected", analyzer, append(args, "--storage.path="+filepath.Join(dir, "protected.db"),
		"--web.listen-address="+tg.protected, "--web.config.file="+webConfig)...)
	// Without the password the protected analyzer answers nothing but 401,
	// so its job's data below came through the quickstart's basic_auth.
	waitHTTP(ctx, t, "http://"+tg.protected+"/metrics", http.StatusUnauthorized)

	prom := &promClient{base: "http://" + promAddr}
	vars := map[string]string{"hostname": firstNode(t, root), "gpu": ".*", "team": ".*", "job": ".*", "price": "1"}
	queries := panelQueries(t, root)
	var empty []string
	var up map[string]string
	for deadline := time.Now().Add(panelDeadline); ; time.Sleep(5 * time.Second) {
		up = prom.targetsUp(t)
		empty = emptyQueries(t, prom, queries, vars)
		allUp := up[tg.exporter] == "1" && up[tg.analyzer] == "1" && up[tg.protected] == "1"
		if (allUp && len(empty) == 0) || time.Now().After(deadline) {
			break
		}
	}
	for _, addr := range []string{tg.exporter, tg.analyzer, tg.protected} {
		if up[addr] != "1" {
			t.Errorf("Prometheus' scrape of %s: up %q, want 1 (every target: %v)", addr, up[addr], up)
		}
	}
	for _, e := range empty {
		t.Errorf("empty after the quickstart: %s", e)
	}
	if delivered.Load() == 0 {
		t.Error("the policy's notify and warn steps reached no channel: the actions panels read them")
	}
	t.Logf("%d of %d panel queries returned data; %d panels may be empty (mayBeEmpty)", len(queries)-len(empty)-countAllowed(t, prom, queries, vars), len(queries), len(mayBeEmpty))
}

// panelQueries are every target of every panel of the generated dashboards.
func panelQueries(t *testing.T, root string) []dashboards.Query {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "dashboards", "generated", "*.json"))
	if err != nil || len(files) != len(dashboards.All()) {
		t.Fatalf("generated dashboards: %d files, want %d (%v)", len(files), len(dashboards.All()), err)
	}
	var out []dashboards.Query
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := dashboards.Queries(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, qs...)
	}
	seen := map[string]bool{}
	for _, q := range out {
		seen[panelKey(q)] = true
	}
	for k := range mayBeEmpty {
		if !seen[k] {
			t.Errorf("mayBeEmpty names %q, which no dashboard has: remove it", k)
		}
	}
	return out
}

func panelKey(q dashboards.Query) string { return q.Dashboard + " / " + q.Panel }

// emptyQueries runs every query and lists those that fail or return no
// series, but for the allowed ones.
func emptyQueries(t *testing.T, prom *promClient, qs []dashboards.Query, vars map[string]string) []string {
	t.Helper()
	var out []string
	for _, q := range qs {
		if _, ok := mayBeEmpty[panelKey(q)]; ok {
			continue
		}
		expr := fill(q.Expr, vars)
		n, err := prom.series(expr, q.Instant)
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s / %s: %v\n  %s", panelKey(q), q.RefID, err, expr))
		case n == 0:
			out = append(out, fmt.Sprintf("%s / %s: no data\n  %s", panelKey(q), q.RefID, expr))
		}
	}
	sort.Strings(out)
	return out
}

// countAllowed counts the allowed queries that were empty, so the log says
// how many panels the allow-list kept out.
func countAllowed(t *testing.T, prom *promClient, qs []dashboards.Query, vars map[string]string) int {
	t.Helper()
	n := 0
	for _, q := range qs {
		if why, ok := mayBeEmpty[panelKey(q)]; ok {
			if got, err := prom.series(fill(q.Expr, vars), q.Instant); err != nil || got == 0 {
				t.Logf("empty, as allowed: %s / %s (%s)", panelKey(q), q.RefID, why)
				n++
			}
		}
	}
	return n
}
