package features_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
)

// hamiScrapes are the recordings of testdata/hami, each as the scrape
// target Prometheus read it from: HAMi's monitor runs on every node (a
// DaemonSet pod), its scheduler once.
var hamiScrapes = []struct {
	file, instance, pod, container string
}{
	{"vgpumonitor.prom", "10.0.7.7:9394", "hami-device-plugin-x7k2p", "vgpu-monitor"},
	{"scheduler.prom", "10.0.0.3:31993", "hami-scheduler-5d8f7c9b6-q2w4z", "vgpu-scheduler-extender"},
}

// legacyHAMi are HAMi's names and labels before v2.9 (and under
// --legacy-metrics), from its cmd/vGPUmonitor/metrics.go and
// cmd/scheduler/metrics.go legacy descriptors.
var (
	legacyHAMiNames = map[string]string{
		"hami_vgpu_memory_used_bytes":             "vGPU_device_memory_usage_in_bytes",
		"hami_vgpu_memory_limit_bytes":            "vGPU_device_memory_limit_in_bytes",
		"hami_container_device_utilization_ratio": "Device_utilization_desc_of_container",
		"hami_vgpu_core_allocated_ratio":          "vGPUCoreAllocated",
		"hami_vgpu_memory_allocated_bytes":        "vGPUMemoryAllocated",
		"hami_host_gpu_memory_used_bytes":         "HostGPUMemoryUsage",
		"hami_host_gpu_utilization_ratio":         "HostCoreUtilization",
	}
	legacyHAMiLabels = map[string]string{"namespace": "podnamespace", "pod": "podname", "container": "ctrname",
		"vdevice_index": "vdeviceid", "device_uuid": "deviceuuid", "node": "nodename", "container_index": "containeridx",
		"device_index": "deviceidx", "device_type": "devicetype"}
)

// loadHAMi reads the recorded scrapes into a new embedded store, as a
// Prometheus with honor_labels as given would have stored them (legacy:
// under HAMi's older names and labels).
func loadHAMi(t *testing.T, honorLabels, legacy bool) query.Querier {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var ss []embedded.Sample
	for _, sc := range hamiScrapes {
		f, err := os.Open(filepath.Join("testdata", "hami", sc.file))
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", sc.file, err)
		}
		for name, mf := range fams {
			if n, ok := legacyHAMiNames[name]; ok && legacy {
				name = n
			}
			for _, m := range mf.GetMetric() {
				l := map[string]string{"__name__": name, "instance": sc.instance, "job": "hami"}
				for _, p := range m.GetLabel() {
					k := p.GetName()
					if n, ok := legacyHAMiLabels[k]; ok && legacy {
						k = n
					}
					if !honorLabels && (k == "namespace" || k == "pod" || k == "container") {
						k = features.ExportedPrefix + k
					}
					l[k] = p.GetValue()
				}
				if !honorLabels {
					// The scrape target's own labels, as service discovery
					// gives them.
					l["namespace"], l["pod"], l["container"] = "kube-system", sc.pod, sc.container
				}
				ss = append(ss, embedded.Sample{Labels: l, T: time.UnixMilli(m.GetTimestampMs()), V: m.GetGauge().GetValue()})
			}
		}
	}
	if err := db.Appender().AppendSamples(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestHAMiShareWaste: reading HAMi's recorded metrics gives each
// container's share waste: what it reserved (cores, memory) against what
// it used over the last hour, and the quota that would hold its use. The
// LLM server used 12.5 % of its 50 % of the cores (peak 14 %) and 6 of
// its 20 GiB; the embedder used its share; the notebook never ran a
// kernel. The same figures whatever honor_labels and under HAMi's older
// names.
func TestHAMiShareWaste(t *testing.T) {
	at := time.Date(2026, 9, 1, 1, 0, 0, 0, time.UTC) // the last scrape
	for _, c := range []struct {
		name                string
		honorLabels, legacy bool
	}{
		{"honor_labels true", true, false},
		{"honor_labels false", false, false},
		{"legacy names", true, true},
		{"legacy names, honor_labels false", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &query.Counting{Q: loadHAMi(t, c.honorLabels, c.legacy)}
			ws, err := features.ReadHAMi(context.Background(), q, at, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if q.Count() != 1 {
				t.Errorf("%d queries, want 1", q.Count())
			}
			checkHAMiWaste(t, ws)
		})
	}
}

func checkHAMiWaste(t *testing.T, ws []features.ShareWaste) {
	t.Helper()
	by := map[string]features.ShareWaste{}
	for _, w := range ws {
		if w.Host != "gpu-07" || w.UUID != "GPU-6a3f1c2e-8d4b-4f7a-9e21-3b5c7d9f0a11" {
			t.Errorf("%s/%s on %s %s, want gpu-07's GPU 0", w.Namespace, w.Pod, w.Host, w.UUID)
		}
		by[w.Namespace+"/"+w.Pod+"/"+w.Container] = w
	}
	if len(by) != 3 {
		t.Fatalf("shares %v, want the three containers'", ws)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	// The window (left-open, as Prometheus 3 reads it) holds the four
	// scrapes after the first.
	llm := by["infer/llm-0/server"]
	if !llm.HasCores || !near(llm.Hours, 1) || !near(llm.ReservedCores, 50) || !near(llm.UsedCoresMean, 12.5) ||
		!near(llm.UsedCoresPeak, 14) || !near(llm.ReservedMiB, 20480) || !near(llm.UsedPeakMiB, 6144) {
		t.Errorf("LLM server %+v", llm)
	}
	// 37.5 % of the device unused for an hour; 14 % and 6 GiB with a
	// quarter more room, rounded up: 20 % and 8 GiB.
	if !near(llm.WastedGPUHours, 0.375) || !near(llm.FitCores, 20) || !near(llm.FitMiB, 8192) {
		t.Errorf("LLM server waste %.4f GPU-h, fit %v%% and %v MiB; want 0.375, 20 and 8192", llm.WastedGPUHours, llm.FitCores, llm.FitMiB)
	}
	if a := llm.Advice(); !strings.Contains(a, "nvidia.com/gpucores: 20") || !strings.Contains(a, "nvidia.com/gpumem: 8192") {
		t.Errorf("LLM server advice %q", a)
	}
	emb := by["infer/embed-0/embed"]
	if !emb.HasCores || !near(emb.WastedGPUHours, 0.0075) || emb.FitCores != emb.ReservedCores || emb.FitMiB != emb.ReservedMiB {
		t.Errorf("embedder %+v, want its share fitting its use", emb)
	}
	if a := emb.Advice(); !strings.Contains(a, "fits its use") {
		t.Errorf("embedder advice %q", a)
	}
	nb := by["lab/nb-ann/notebook"]
	if !nb.HasCores || !near(nb.WastedGPUHours, 0.2) || nb.FitCores != 0 || nb.UsedCoresPeak != 0 {
		t.Errorf("notebook %+v, want its whole 20%% wasted for the hour", nb)
	}
	if a := nb.Advice(); !strings.Contains(a, "release the share") {
		t.Errorf("notebook advice %q", a)
	}
}
