package engine

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/schema"
)

// tenantsScenario (issue 57): on ten-01, GPU 0 is time-sliced among three
// servers working at about 30 % of the device each and a notebook idle
// after its first 10 minutes; GPU 1 among four such idle notebooks; GPU 2
// is one idle notebook's alone, the measure of a device's idle hours. The
// simulator publishes each holder's own use of GPUs 0 and 1 (shared: true).
const tenantsScenario = `
name: tenants
fleet:
  - {hostname: ten-01, model: H100-SXM5-80GB, gpus: 3}
workloads:
  - {id: serve-a, scheduler: kubernetes, namespace: infer, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-b, scheduler: kubernetes, namespace: infer, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-c, scheduler: kubernetes, namespace: infer, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: jupyter-bo, scheduler: kubernetes, namespace: hub, container: notebook, user: bo, team: search, kind: interactive, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 30, memory_gib: 4}}
  - {id: jupyter-cat, scheduler: kubernetes, namespace: hub, container: notebook, user: cy, team: search, kind: interactive, node: ten-01, gpus: [1], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
  - {id: jupyter-dan, scheduler: kubernetes, namespace: hub, container: notebook, user: cy, team: search, kind: interactive, node: ten-01, gpus: [1], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
  - {id: jupyter-eve, scheduler: kubernetes, namespace: hub, container: notebook, user: cy, team: search, kind: interactive, node: ten-01, gpus: [1], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
  - {id: jupyter-fay, scheduler: kubernetes, namespace: hub, container: notebook, user: cy, team: search, kind: interactive, node: ten-01, gpus: [1], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
  - {id: jupyter-sol, scheduler: kubernetes, namespace: hub, container: notebook, user: di, team: search, kind: interactive, node: ten-01, gpus: [2], start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 20, memory_gib: 4}}
`

var (
	tenantsOrigin = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	tenantsSpan   = 4*time.Hour + 10*time.Minute
)

// TestSharedGPUTenantsJudgedOnTheirOwnUse is issue 57's acceptance: each
// holder of a time-sliced GPU is judged on its own use, through the
// embedded store and a real Prometheus serving the same data, from the
// simulator's series as gpuwatch's exporter publishes them (the holders
// joined in the device series' pod label, each one's own use in
// gpuwatch_holder_*). The idle notebook among three busy servers is an
// idle session at a quarter of the device's idle hours (the lone
// notebook's), and none of the servers has a finding; the four idle
// notebooks of GPU 1 are four idle sessions whose hours sum to the
// device's. Before, the four holders of GPU 0 were one allocation judged
// on the device's counters: busy, the idle tenant invisible.
func TestSharedGPUTenantsJudgedOnTheirOwnUse(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 4 simulated hours and starts a Prometheus")
	}
	needProm(t)
	emb, prom := tenantStores(t, simload.Format{})
	a := classAnalyses(t, emb, prom, config.Default(), tenantsOrigin, tenantsOrigin.Add(tenantsSpan))
	by := findingsByJob(a.Findings)
	sole := idleSessionOf(t, by, "hub/jupyter-sol")
	quarter(t, idleSessionOf(t, by, "hub/jupyter-bo"), sole)
	for _, job := range []string{"infer/serve-a", "infer/serve-b", "infer/serve-c"} {
		if fs := by[job]; len(fs) > 0 {
			t.Errorf("busy server %s of the shared GPU has findings: %v", job, patternsOf(fs))
		}
		// Its quarter of the device, used all along.
		if al := a.Book.Allocations[accounting.Key("ten-01", job)]; al == nil || al.Used < 0.9*al.Allocated {
			t.Errorf("busy server %s: accounting %+v, want its share used", job, al)
		}
	}
	idleHoldersShareTheDevice(t, by, sole)
}

// TestSharedGPUWithoutOwnUseIsUnknownWhenBusy: the same fleet without
// gpuwatch_holder_* (dcgm-exporter's families only: what a MIG instance
// or an old driver leaves; GPU 0's servers in the notebooks' namespace, so
// that the joined pod label names each holder) judges each holder on the
// device's counters only where they bound it: GPU 1's four idle notebooks
// are still idle sessions summing to the device's hours, but the holders
// of busy GPU 0 are unknown: each holds a quarter of the device, none is
// counted as using it or wasting it, and none has a finding.
func TestSharedGPUWithoutOwnUseIsUnknownWhenBusy(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 4 simulated hours")
	}
	sc := strings.ReplaceAll(tenantsScenario, "namespace: infer", "namespace: hub")
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "tenants.yaml", sc),
		simload.Options{Seed: 5, Origin: tenantsOrigin, From: 30 * time.Second, To: tenantsSpan, Resolution: 30 * time.Second},
		simload.Format{Stock: true}.Sink)
	a := analyzeSpan(t, db, config.Default(), tenantsOrigin, tenantsOrigin.Add(tenantsSpan))
	by := findingsByJob(a.Findings)
	for _, job := range []string{"hub/serve-a", "hub/serve-b", "hub/serve-c", "hub/jupyter-bo"} {
		if fs := by[job]; len(fs) > 0 {
			t.Errorf("%s, a holder of a busy shared GPU without its own use, has findings: %v", job, patternsOf(fs))
		}
		al := a.Book.Allocations[accounting.Key("ten-01", job)]
		if al == nil {
			t.Fatalf("no allocation of %s: the joined label's holders not told apart", job)
		}
		if hours := tenantsSpan.Hours(); al.Allocated < 0.22*hours || al.Allocated > 0.28*hours || al.Used > 0.05*al.Allocated {
			t.Errorf("%s: %.3f GPU-h allocated, %.3f used; want a quarter of the device's %.2f h, none judged used", job, al.Allocated, al.Used, hours)
		}
	}
	sole := idleSessionOf(t, by, "hub/jupyter-sol")
	idleHoldersShareTheDevice(t, by, sole)
}

// tenantStores replays tenantsScenario in format f into an embedded store
// and serves a snapshot of it with a real Prometheus.
func tenantStores(t *testing.T, f simload.Format) (*embedded.DB, query.Querier) {
	t.Helper()
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "tenants.yaml", tenantsScenario),
		simload.Options{Seed: 5, Origin: tenantsOrigin, From: 30 * time.Second, To: tenantsSpan, Resolution: 30 * time.Second}, f.Sink)
	data := filepath.Join(t.TempDir(), "data")
	if err := db.TSDB().Snapshot(data, true); err != nil {
		t.Fatalf("snapshot of the embedded store: %v", err)
	}
	c, err := promapi.New(servePrometheus(t, data).url, promapi.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return db, c
}

func findingsByJob(fs []finding.Finding) map[string][]finding.Finding {
	by := map[string][]finding.Finding{}
	for _, f := range fs {
		by[f.Job] = append(by[f.Job], f)
	}
	return by
}

func idleSessionOf(t *testing.T, by map[string][]finding.Finding, job string) finding.Finding {
	t.Helper()
	for _, f := range by[job] {
		if f.Pattern == schema.IdleSession {
			return f
		}
	}
	t.Fatalf("no idle_session of %s: %v", job, patternsOf(by[job]))
	return finding.Finding{}
}

// idleHoldersShareTheDevice fails unless each of GPU 1's four idle
// notebooks has an idle session of a quarter of sole's GPU-hours, and the
// four sum to the device's hours once.
func idleHoldersShareTheDevice(t *testing.T, by map[string][]finding.Finding, sole finding.Finding) {
	t.Helper()
	sum := 0.0
	for _, job := range []string{"hub/jupyter-cat", "hub/jupyter-dan", "hub/jupyter-eve", "hub/jupyter-fay"} {
		f := idleSessionOf(t, by, job)
		quarter(t, f, sole)
		sum += f.WastedGPUHours
	}
	if math.Abs(sum-sole.WastedGPUHours) > 0.03*sole.WastedGPUHours {
		t.Errorf("the four idle holders of GPU 1 waste %.3f GPU-h together, want the device's %.3f once", sum, sole.WastedGPUHours)
	}
}

// quarter fails unless f wasted a quarter of sole's GPU-hours.
func quarter(t *testing.T, f, sole finding.Finding) {
	t.Helper()
	if q := f.WastedGPUHours / sole.WastedGPUHours; q < 0.22 || q > 0.28 {
		t.Errorf("%s %s: %.3f GPU-h, %.2f of the whole GPU's %.3f, want a quarter", f.Pattern, f.Job, f.WastedGPUHours, q, sole.WastedGPUHours)
	}
}

func patternsOf(fs []finding.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Pattern))
	}
	return out
}

// TestVGPUCopiesAreNoTenantsUse: dcgm-exporter's per-vgpu copies of a busy
// time-sliced GPU (KUBERNETES_VIRTUAL_GPUS) carry the device's totals
// under each pod. No pod is counted as using the GPU on them (before, each
// was: four pods, each "busy" on the others' work), none is judged, and
// the device's hours are allocated once among them.
func TestVGPUCopiesAreNoTenantsUse(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 3 simulated hours")
	}
	sc := `
name: vgpu-busy
fleet:
  - {hostname: ts-01, model: H100-SXM5-80GB, gpus: 1}
workloads:
  - {id: infer-a, scheduler: kubernetes, namespace: inf, container: main, user: ann, team: inf, node: ts-01, gpus: [0], start: 0s, duration: 3h, behaviour: training}
`
	pods := []simload.Pod{{Name: "infer-b", Namespace: "inf", Container: "main"}, {Name: "infer-c", Namespace: "inf", Container: "main"},
		{Name: "infer-d", Namespace: "inf", Container: "main"}}
	span := 3 * time.Hour
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "vgpu.yaml", sc),
		simload.Options{Seed: 5, Origin: tenantsOrigin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second},
		simload.Format{Stock: true}.Sink, simload.TimeSliced{Host: "ts-01", GPU: 0, Pods: pods}.Sink)
	a := analyzeSpan(t, db, config.Default(), tenantsOrigin, tenantsOrigin.Add(span))
	if len(a.Findings) > 0 {
		t.Errorf("findings on the device's totals: %v", patternsOf(a.Findings))
	}
	total := 0.0
	for _, job := range []string{"inf/infer-a", "inf/infer-b", "inf/infer-c", "inf/infer-d"} {
		al := a.Book.Allocations[accounting.Key("ts-01", job)]
		if al == nil {
			t.Fatalf("no allocation of %s", job)
		}
		if al.Used > 0.05*al.Allocated {
			t.Errorf("%s: %.3f of its %.3f GPU-h counted used, on the device's totals", job, al.Used, al.Allocated)
		}
		total += al.Allocated
	}
	if math.Abs(total-span.Hours()) > 0.05*span.Hours() {
		t.Errorf("the four pods hold %.3f GPU-h together, want the device's %.2f once", total, span.Hours())
	}
}
