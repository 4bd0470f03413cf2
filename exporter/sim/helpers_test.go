package sim

import (
	"context"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fakeClock is a settable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

var testOrigin = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// newSim builds a source over a scenario text with a fake clock at the origin.
func newSim(t testing.TB, yml string, seed int64) (*Source, *fakeClock) {
	t.Helper()
	sc, err := ParseScenario("test.yaml", []byte(yml))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return newSimFrom(t, sc, seed)
}

func newSimFrom(t testing.TB, sc *Scenario, seed int64) (*Source, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: testOrigin}
	src, err := New(sc, Options{Seed: seed, Clock: clk})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	return src, clk
}

// at collects every node at offset off from the origin.
func at(t testing.TB, src *Source, clk *fakeClock, off time.Duration) map[string]*source.Snapshot {
	t.Helper()
	clk.t = src.Origin().Add(off)
	snaps, err := src.CollectAll(context.Background())
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]*source.Snapshot{}
	for _, s := range snaps {
		out[s.Hostname] = s
	}
	return out
}

// value returns a device's sample of m (with label values lv), and whether it exists.
func value(d *source.Device, m *schema.Metric, lv ...string) (float64, bool) {
	for _, s := range d.Samples {
		if s.Metric != m || len(s.LabelValues) != len(lv) {
			continue
		}
		match := true
		for i := range lv {
			if s.LabelValues[i] != lv[i] {
				match = false
			}
		}
		if match {
			return s.Value, true
		}
	}
	return 0, false
}

func mustValue(t testing.TB, d *source.Device, m *schema.Metric, lv ...string) float64 {
	t.Helper()
	v, ok := value(d, m, lv...)
	if !ok {
		t.Fatalf("device %d (%s): no %s%v", d.Index, d.Key(), m.Name, lv)
	}
	return v
}

func gpu(t testing.TB, snap *source.Snapshot, idx int) *source.Device {
	t.Helper()
	for i := range snap.Devices {
		if snap.Devices[i].Index == idx && snap.Devices[i].MIG == nil {
			return &snap.Devices[i]
		}
	}
	t.Fatalf("%s: no GPU %d", snap.Hostname, idx)
	return nil
}

func processesOn(snap *source.Snapshot, key string) []source.Process {
	var out []source.Process
	for _, p := range snap.Processes {
		if p.DeviceKey == key {
			out = append(out, p)
		}
	}
	return out
}

func allocationsOn(snap *source.Snapshot, key string) []source.Allocation {
	var out []source.Allocation
	for _, a := range snap.Allocations {
		if a.DeviceKey == key {
			out = append(out, a)
		}
	}
	return out
}

func jobCPU(snap *source.Snapshot, job string) (float64, bool) {
	for _, j := range snap.JobCPU {
		if j.Job == job {
			return j.Seconds, true
		}
	}
	return 0, false
}
