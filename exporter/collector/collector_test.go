package collector

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestCollector(t *testing.T, src source.Source, clk source.Clock) *Collector {
	t.Helper()
	c, err := New(Options{Source: src, Interval: time.Second, Clock: clk, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func parse(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(text)))
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return mfs
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func find(mf *dto.MetricFamily, want map[string]string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		l := labels(m)
		ok := true
		for k, v := range want {
			if l[k] != v {
				ok = false
				break
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

func TestExpositionLabelsAndValues(t *testing.T) {
	snap := fullSnapshot(2, 1)
	snap.Devices = append(snap.Devices, source.Device{Index: 1, UUID: snap.Devices[1].UUID, PCIBusID: snap.Devices[1].PCIBusID,
		Model: snap.Devices[1].Model, Up: true, MIG: &source.MIG{Profile: "1g.10gb", GIID: 7},
		Samples: []source.Sample{{Metric: schema.FBUsed, Value: 512}}})
	c := newTestCollector(t, &fakeSource{snap: snap}, &fakeClock{t: snap.Time})
	e, err := c.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, e.Text)

	util := mfs[schema.GPUUtil.Name]
	if util == nil || len(util.Metric) != 2 {
		t.Fatalf("want 2 %s series, got %v", schema.GPUUtil.Name, util)
	}
	m := find(util, map[string]string{"gpu": "0"})
	want := map[string]string{"gpu": "0", "UUID": snap.Devices[0].UUID, "pci_bus_id": snap.Devices[0].PCIBusID,
		"device": "nvidia0", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "node-a", "hpc_job": "4242"}
	if got := labels(m); !equalMaps(got, want) {
		t.Errorf("labels of GPU 0:\n got %v\nwant %v", got, want)
	}
	if got := labels(find(util, map[string]string{"gpu": "1"})); got["hpc_job"] != "" {
		t.Errorf("unallocated GPU carries hpc_job=%q", got["hpc_job"])
	}
	// Values pass through unchanged.
	for _, s := range snap.Devices[0].Samples {
		if len(s.Metric.Labels) > 0 {
			continue
		}
		mf := mfs[s.Metric.Name]
		if mf == nil {
			t.Fatalf("%s missing", s.Metric.Name)
		}
		if got := value(find(mf, map[string]string{"gpu": "0"})); got != s.Value {
			t.Errorf("%s = %v, want %v", s.Metric.Name, got, s.Value)
		}
	}
	// MIG instance: its own series with the MIG labels.
	fb := find(mfs[schema.FBUsed.Name], map[string]string{"GPU_I_ID": "7"})
	if fb == nil || labels(fb)["GPU_I_PROFILE"] != "1g.10gb" || value(fb) != 512 {
		t.Errorf("MIG series: %v", fb)
	}
	// Allocation info, process memory and job CPU.
	ai := find(mfs[schema.AllocationInfo.Name], map[string]string{"job_id": "4242", "user": "alice", "team": "vision", "kind": "batch", "scheduler": "slurm", "gpu": "0"})
	if ai == nil {
		t.Errorf("allocation info missing: %v", mfs[schema.AllocationInfo.Name])
	}
	pm := find(mfs[schema.ProcessMemory.Name], map[string]string{"pid": "1000", "command": "python3", "user": "alice", "job_id": "4242", "gpu": "0"})
	if pm == nil || value(pm) != 1<<30 {
		t.Errorf("process memory: %v", pm)
	}
	if cpu := mfs[schema.JobCPUSeconds.Name]; cpu == nil || value(cpu.Metric[0]) != 12.5 {
		t.Errorf("job cpu: %v", cpu)
	}
	if mfs[schema.LastCollect.Name] == nil || mfs[schema.CollectDuration.Name] == nil {
		t.Error("self metrics missing")
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestLostGPUHidesNothingElse(t *testing.T) {
	snap := fullSnapshot(3, 0)
	snap.Devices[1].Up = false
	snap.Errors = []source.FieldError{{DeviceKey: snap.Devices[1].Key(), Field: "device", Err: errBoom},
		{DeviceKey: snap.Devices[2].Key(), Field: "ecc", Err: errBoom}}
	reg := prometheus.NewRegistry()
	c, err := New(Options{Source: &fakeSource{snap: snap}, Interval: time.Second, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mfs := parse(t, e.Text)
	up := mfs[schema.GPUUp.Name]
	for gpu, want := range map[string]float64{"0": 1, "1": 0, "2": 1} {
		if got := value(find(up, map[string]string{"gpu": gpu})); got != want {
			t.Errorf("gpu_up{gpu=%s} = %v, want %v", gpu, got, want)
		}
	}
	util := mfs[schema.GPUUtil.Name]
	if len(util.Metric) != 2 || find(util, map[string]string{"gpu": "1"}) != nil {
		t.Errorf("lost GPU must publish no telemetry, others must: %v", util)
	}
	errs := mfs[schema.CollectErrors.Name]
	for _, f := range []string{"device", "ecc"} {
		if m := find(errs, map[string]string{"field": f}); m == nil || value(m) != 1 {
			t.Errorf("collect errors{field=%s}: %v", f, m)
		}
	}
}

func TestScrapeNeverWaitsOnSource(t *testing.T) {
	src := &fakeSource{snap: fullSnapshot(1, 0)}
	c := newTestCollector(t, src, nil)
	if _, err := c.CollectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := c.Latest()
	src.mu.Lock()
	src.block = make(chan struct{})
	src.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = c.CollectOnce(context.Background()) // blocks until the timeout
		close(done)
	}()
	start := time.Now()
	for i := 0; i < 100; i++ {
		if c.Latest() != first {
			t.Fatal("latest changed while the source hangs")
		}
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("reading the latest exposition took %s while the source hangs", d)
	}
	<-done // Timeout (= Interval) ends the hung collection.
}

func TestHealthGoesStale(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	src := &fakeSource{snap: fullSnapshot(1, 0)}
	c := newTestCollector(t, src, clk)
	if ok, reason := c.Health(); ok || !strings.Contains(reason, "no successful collection") {
		t.Errorf("before first collection: %v %q", ok, reason)
	}
	if _, err := c.CollectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Health(); !ok {
		t.Error("fresh collection reported unhealthy")
	}
	src.err = errBoom
	clk.Add(4 * time.Second)
	if _, err := c.CollectOnce(context.Background()); !errors.Is(err, errBoom) {
		t.Fatalf("want boom, got %v", err)
	}
	ok, reason := c.Health()
	if ok || !strings.Contains(reason, "stale after 3s") || !strings.Contains(reason, "boom") {
		t.Errorf("stale: %v %q", ok, reason)
	}
}

func TestSharedGPUListsEveryHolder(t *testing.T) {
	snap := fullSnapshot(1, 0)
	k := snap.Devices[0].Key()
	snap.Allocations = []source.Allocation{
		{DeviceKey: k, Scheduler: schema.SchedulerKubernetes, Pod: "b", Namespace: "ml", Container: "c", User: "u2", Team: "t"},
		{DeviceKey: k, Scheduler: schema.SchedulerKubernetes, Pod: "a", Namespace: "ml", Container: "c", User: "u1", Team: "t"},
	}
	mfs := map[string]*dto.MetricFamily{}
	for _, mf := range Render(snap) {
		mfs[mf.GetName()] = mf
	}
	util := mfs[schema.GPUUtil.Name]
	if len(util.Metric) != 1 || labels(util.Metric[0])["pod"] != "a,b" {
		t.Errorf("shared GPU series must not be duplicated and name both pods: %v", util.Metric)
	}
	if n := len(mfs[schema.AllocationInfo.Name].Metric); n != 2 {
		t.Errorf("allocation_info must list both holders, got %d", n)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := New(Options{Interval: time.Second}); err == nil {
		t.Error("no source accepted")
	}
	if _, err := New(Options{Source: &fakeSource{}, Interval: 0}); err == nil {
		t.Error("zero interval accepted")
	}
}
