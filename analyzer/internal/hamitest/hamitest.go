// Package hamitest holds recorded scrapes of HAMi's metrics (its per-node
// monitor and its scheduler, in their exposition format: testdata) and
// loads them into an embedded store as a Prometheus would have stored
// them, for the tests of the analyzer's HAMi reading.
package hamitest

import (
	"bytes"
	"context"
	"embed"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
)

//go:embed testdata/*.prom
var recordings embed.FS

// exportedPrefix is what Prometheus puts before a target's own label when
// the scrape sets it too (honor_labels: false).
const exportedPrefix = "exported_"

// At is the time of the recordings' last scrape; they cover the hour
// before it.
var At = time.Date(2026, 9, 1, 1, 0, 0, 0, time.UTC)

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

// Load reads the recorded scrapes into a new embedded store, as a
// Prometheus with honor_labels as given would have stored them (legacy:
// under HAMi's older names and labels).
func Load(t testing.TB, honorLabels, legacy bool) query.Querier {
	t.Helper()
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var ss []embedded.Sample
	for _, sc := range hamiScrapes {
		b, err := recordings.ReadFile("testdata/" + sc.file)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(b))
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
						k = exportedPrefix + k
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
