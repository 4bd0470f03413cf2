package engine

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fieldScenario is three nodes whose targets a site scrapes at 15, 30 and
// 60 s, each with the same mix: a batch job that never touches its GPU, a
// Deployment that fell back to the CPU (util 0, no memory in use),
// a job that hangs after an hour, healthy training, and later an
// over-requested pair and an idle notebook.
const fieldScenario = `
name: field-mix
description: mixed scrape intervals and exporter pods
fleet:
  - hostnames: [n15, n30, n60]
    model: A100-SXM4-80GB
    gpus: 4
workloads:
%s`

func fieldWorkloads() string {
	var b strings.Builder
	for i, n := range []string{"n15", "n30", "n60"} {
		id := 100 + 10*i
		fmt.Fprintf(&b, `  - {id: "%d", user: ann, team: nlp, job_name: etl, node: %s, gpus: [0], start: 1h, duration: 4h, behaviour: cpu_only, expect: [cpu_only]}
  - {id: "%d", user: bob, team: nlp, job_name: train, node: %s, gpus: [1], start: 1h, duration: 9h, behaviour: training, expect: []}
  - {id: "%d", user: eve, team: llm, job_name: rl, node: %s, gpus: [2], start: 1h, duration: 6h, behaviour: stuck_idle, params: {active: 1h}, expect: [stuck]}
  - {id: embed-api-7d4b9c8f6d-%s, scheduler: kubernetes, namespace: serving, kind: service, user: dan, team: search, job_name: embed-api,
     node: %s, gpus: [3], start: 30m, duration: 7h, behaviour: cpu_only, expect: [cpu_only]}
  - {id: "%d", user: fay, team: vision, job_name: ddp, node: %s, gpus: [0, 2], start: 7h, duration: 5h, behaviour: partial_gpus, params: {idle_gpus: 1}, expect: [over_requested]}
  - {id: jupyter-gil, scheduler: kubernetes, namespace: lab, user: gil, team: lab, job_name: jupyter,
     node: %s, gpus: [3], start: 8h, duration: 5h, behaviour: idle_notebook, expect: [idle_session]}
`, id, n, id+1, n, id+2, n, map[string]string{"n15": "x2k9q", "n30": "b4n9z", "n60": "q7w2m"}[n], n, id+3, n, n)
	}
	return b.String()
}

var fieldSpan = 14 * time.Hour

// suffix is a DaemonSet pod's random tail, fixed per node and epoch.
func suffix(host string, epoch int64) string { return fieldgen.PodSuffix(host, int(epoch)) }

// Exporter pods as three installs name them.
var exporterSchemes = map[string]func(host string, epoch int64) (string, string, string){
	"helm": func(host string, e int64) (string, string, string) {
		return "obs-dcgm-exporter-" + suffix(host, e), "monitoring", "exporter"
	},
	"gpu-operator": func(host string, e int64) (string, string, string) {
		return "nvidia-dcgm-exporter-" + suffix(host, e), "gpu-operator", "nvidia-dcgm-exporter"
	},
	"custom": func(host string, e int64) (string, string, string) {
		return "gpu-telemetry-" + suffix(host, e), "ops", "collector"
	},
}

type fieldStores struct {
	sc     *sim.Scenario
	origin time.Time
	dbs    map[string]*embedded.DB
	om     string
}

// openField replays the scenario once at 15 s into one store per format.
func openField(t *testing.T, formats map[string]simload.Format, openMetrics string) fieldStores {
	t.Helper()
	if testing.Short() {
		t.Skip("replays 14 hours of three nodes")
	}
	sc, err := sim.ParseScenario("field-mix", []byte(fmt.Sprintf(fieldScenario, fieldWorkloads())))
	if err != nil {
		t.Fatal(err)
	}
	fs := fieldStores{sc: sc, origin: corpusOrigin, dbs: map[string]*embedded.DB{}}
	dir := t.TempDir()
	ctx := context.Background()
	var sinks []simload.Sink
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	var om *simload.OpenMetrics
	for _, n := range names {
		db, err := embedded.Open(filepath.Join(dir, n), embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		fs.dbs[n] = db
		app := db.Appender()
		write := func(ts time.Time, f []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, f) }
		if n == openMetrics {
			// The format is applied once, for the store and the file both.
			om = simload.NewOpenMetrics(dir)
			store := write
			write = func(ts time.Time, f []*dto.MetricFamily) error {
				if err := store(ts, f); err != nil {
					return err
				}
				return om.Sink(ts, f)
			}
		}
		sink := formats[n].Sink(write)
		sinks = append(sinks, sink)
	}
	start := time.Now()
	fan := simload.NewFanout(ctx, sinks...)
	_, err = simload.Replay(ctx, sc, simload.Options{Seed: 7, Origin: fs.origin, To: fieldSpan, Resolution: 15 * time.Second}, fan.Sink)
	if cerr := fan.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if om != nil {
		fs.om = filepath.Join(dir, "field.om")
		if err := om.Close(fs.om); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("replayed %s into %d formats in %s", fieldSpan, len(formats), time.Since(start).Round(time.Millisecond))
	return fs
}

func analyzeField(t *testing.T, q query.Querier, fs fieldStores) Analysis {
	t.Helper()
	e, err := New(Options{Querier: q, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(context.Background(), fs.origin, fs.origin.Add(fieldSpan))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func byKey(fs []finding.Finding) map[string]finding.Finding {
	out := map[string]finding.Finding{}
	for _, f := range fs {
		out[f.Key()] = f
	}
	return out
}

// within2 compares two GPU-hour figures to ±2 % (with a floor of 0.05
// GPU-hours for figures near zero).
func within2(a, b float64) bool { return math.Abs(a-b) <= math.Max(0.02*math.Max(a, b), 0.05) }

// sameAnalysis requires the same findings, each with the same GPU-hours
// (±2 %), and the same allocated and used GPU-hours per allocation.
func sameAnalysis(t *testing.T, what string, want, got Analysis) {
	t.Helper()
	w, g := byKey(want.Findings), byKey(got.Findings)
	for k, f := range w {
		x, ok := g[k]
		if !ok {
			t.Errorf("%s: finding %s (%.2f GPU-h) missing", what, k, f.WastedGPUHours)
			continue
		}
		if !within2(f.WastedGPUHours, x.WastedGPUHours) {
			t.Errorf("%s: %s wasted %.3f GPU-h, want %.3f", what, k, x.WastedGPUHours, f.WastedGPUHours)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: extra finding %s", what, k)
		}
	}
	for k, a := range want.Book.Allocations {
		b := got.Book.Allocations[k]
		if b == nil {
			t.Errorf("%s: allocation %s not accounted", what, k)
			continue
		}
		if !within2(a.Allocated, b.Allocated) || !within2(a.Used, b.Used) {
			t.Errorf("%s: %s allocated %.3f used %.3f GPU-h, want %.3f and %.3f", what, k, b.Allocated, b.Used, a.Allocated, a.Used)
		}
	}
	if !within2(want.Book.Allocated, got.Book.Allocated) || !within2(want.Book.Used, got.Book.Used) || !within2(want.Book.Wasted, got.Book.Wasted) {
		t.Errorf("%s: book %.2f/%.2f/%.2f GPU-h allocated/used/wasted, want %.2f/%.2f/%.2f", what,
			got.Book.Allocated, got.Book.Used, got.Book.Wasted, want.Book.Allocated, want.Book.Used, want.Book.Wasted)
	}
}

func scoreField(t *testing.T, what string, fs fieldStores, a Analysis) {
	t.Helper()
	sc := evaluate(t, fs.sc.ExpectationsAt(fs.origin), a.Findings, nil)
	t.Logf("%s:%s", what, table(sc))
	check(t, sc)
}

var fieldIntervals = map[string]time.Duration{"n15": 15 * time.Second, "n30": 30 * time.Second, "n60": time.Minute}

// TestMixedScrapeIntervals: targets scraped at 15, 30 and 60 s in one
// store give the findings and GPU-hours (±2 %) of the same data scraped at
// one interval, each series judged by its own cadence; through the
// embedded store and a real Prometheus.
func TestMixedScrapeIntervals(t *testing.T) {
	stock := simload.Format{Stock: true, Counters: simload.DCGMDefault, Host: schema.LabelHostname}
	mixed := stock
	mixed.HostIntervals = fieldIntervals
	fs := openField(t, map[string]simload.Format{"one": stock, "mixed": mixed}, "mixed")
	one := analyzeField(t, fs.dbs["one"], fs)
	scoreField(t, "one interval (15 s)", fs, one)
	mix := analyzeField(t, fs.dbs["mixed"], fs)
	scoreField(t, "15/30/60 s", fs, mix)
	sameAnalysis(t, "mixed vs one interval", one, mix)
	if mix.Coverage.Ratio < 0.99*one.Coverage.Ratio {
		t.Errorf("coverage %.3f with mixed intervals, %.3f at one", mix.Coverage.Ratio, one.Coverage.Ratio)
	}
	t.Logf("coverage: one %.3f, mixed %.3f; allocated %.2f / %.2f GPU-h, used %.2f / %.2f, wasted %.2f / %.2f",
		one.Coverage.Ratio, mix.Coverage.Ratio, one.Book.Allocated, mix.Book.Allocated, one.Book.Used, mix.Book.Used, one.Book.Wasted, mix.Book.Wasted)
	needProm(t)
	url := startPrometheus(t, fs.om).url
	c, err := promapi.New(url, promapi.Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	viaProm := analyzeField(t, c, fs)
	sameAnalysis(t, "mixed through Prometheus vs one interval", one, viaProm)
	if d := diffFindings(mix.Findings, viaProm.Findings); d != "" {
		t.Errorf("Prometheus and embedded differ on the mixed store:\n%s", d)
	}
}

// TestExporterPodsNeverJobs: with the exporter's pod on the series under
// three installs' names (NVIDIA's Helm chart, the GPU Operator, a custom
// DaemonSet), with honor_labels false and true, no exporter pod is a job:
// no finding, the findings are those of the data without it, and the
// analysis lists the pods it took as exporters, with why.
func TestExporterPodsNeverJobs(t *testing.T) {
	plain := simload.Format{Stock: true, Counters: simload.DCGMDefault, Host: schema.LabelHostname}
	formats := map[string]simload.Format{"plain": plain}
	for name, scheme := range exporterSchemes {
		if testtool.Race && name != "custom" {
			continue // the race detector's run checks the path, on the scheme no name gives away
		}
		f := plain
		f.HonorLabelsFalse, f.ExporterPod, f.ExporterRestart = true, scheme, 5*time.Hour
		formats[name+"/honor_labels=false"] = f
		g := plain
		g.TargetLabelsOnFreeGPUs, g.ExporterPod, g.ExporterRestart = true, scheme, 5*time.Hour
		formats[name+"/honor_labels=true"] = g
	}
	fs := openField(t, formats, "")
	want := analyzeField(t, fs.dbs["plain"], fs)
	scoreField(t, "no exporter labels", fs, want)
	names := make([]string, 0, len(formats))
	for n := range formats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "plain" {
			continue
		}
		t.Run(n, func(t *testing.T) {
			got := analyzeField(t, fs.dbs[n], fs)
			pod, ns, _ := exporterSchemes[strings.Split(n, "/")[0]]("", 0)
			base := strings.TrimSuffix(pod, suffix("", 0))
			for _, f := range got.Findings {
				if f.Namespace == ns || strings.HasPrefix(f.Pod, base) {
					t.Errorf("the exporter's own pod taken for a job: %s (%s, %s)", f.Key(), f.Severity, f.Action)
				}
			}
			sameAnalysis(t, n, want, got)
			if len(got.Coverage.Exporters) < 3 {
				t.Errorf("exporters listed: %+v, want the pods of three nodes", got.Coverage.Exporters)
			}
			for _, x := range got.Coverage.Exporters {
				if x.Namespace != ns || !strings.HasPrefix(x.Pod, base) || x.Reason == "" {
					t.Errorf("taken as an exporter: %+v", x)
				}
			}
			for _, x := range got.Coverage.Exporters[:min(1, len(got.Coverage.Exporters))] {
				t.Logf("%d exporter pods, e.g. %s/%s: %s", len(got.Coverage.Exporters), x.Namespace, x.Pod, x.Reason)
			}
		})
	}
}
