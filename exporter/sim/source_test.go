package sim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestSameSeedSameSnapshots(t *testing.T) {
	steps := []time.Duration{0, 30 * time.Second, time.Hour, 5*time.Hour + 17*time.Second, 30 * time.Hour}
	run := func(seed int64) []*source.Snapshot {
		src, clk := newSimFrom(t, DefaultScenario(), seed)
		var out []*source.Snapshot
		for _, off := range steps {
			clk.t = src.Origin().Add(off)
			all, err := src.CollectAll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, all...)
		}
		return out
	}
	a, b := run(42), run(42)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, same clock: snapshots differ")
	}
	c := run(43)
	if reflect.DeepEqual(a, c) {
		t.Fatal("different seeds gave identical snapshots")
	}
	// UUIDs depend on the seed but are stable for it.
	if a[0].Devices[0].UUID != b[0].Devices[0].UUID || a[0].Devices[0].UUID == c[0].Devices[0].UUID {
		t.Error("UUIDs are not a function of the seed")
	}
}

// Collect and CollectAll at the same instant agree on a node's snapshot.
func TestCollectSelectsNode(t *testing.T) {
	sc := DefaultScenario()
	clk := &fakeClock{t: testOrigin.Add(3 * time.Hour)}
	for _, node := range []string{"", "h100-01"} {
		src, err := New(sc, Options{Seed: 5, Clock: clk, Node: node, Origin: testOrigin})
		if err != nil {
			t.Fatal(err)
		}
		one, err := src.Collect(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := node
		if want == "" {
			want = src.Nodes()[0]
		}
		if one.Hostname != want {
			t.Errorf("Node %q: got hostname %s", node, one.Hostname)
		}
		ref, _ := New(sc, Options{Seed: 5, Clock: clk, Origin: testOrigin})
		all, _ := ref.CollectAll(context.Background())
		for _, s := range all {
			if s.Hostname == want && !reflect.DeepEqual(s, one) {
				t.Errorf("Collect and CollectAll disagree on %s", want)
			}
			if !s.Time.Equal(clk.t) {
				t.Errorf("%s snapshot at %s, want the clock's %s", s.Hostname, s.Time, clk.t)
			}
		}
	}
	if got := (&Source{nodes: []*simNode{{host: "a"}, {host: "b"}}}).Nodes(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Nodes() = %v", got)
	}
	if _, err := New(sc, Options{Clock: clk, Node: "nope"}); !errors.Is(err, ErrUnknownNode) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown node: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	src, _ := New(sc, Options{Clock: clk})
	if _, err := src.Collect(ctx); err == nil {
		t.Error("Collect ignored a cancelled context")
	}
}

// Every counter and every job's CPU seconds only ever grow, through job
// starts and ends, faults and a lost GPU, over a repeating scenario.
func TestCountersMonotonic(t *testing.T) {
	for _, name := range []string{"default", "throttling-xid", "corpus"} {
		t.Run(name, func(t *testing.T) {
			sc, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			src, clk := newSimFrom(t, sc, 9)
			last := map[string]float64{}
			seen := 0
			for off := time.Duration(0); off < 8*24*time.Hour; off += 7 * time.Minute {
				for _, s := range at(t, src, clk, off) {
					for _, d := range s.Devices {
						for _, smp := range d.Samples {
							if smp.Metric.Type != schema.Counter {
								continue
							}
							k := fmt.Sprint(s.Hostname, d.Key(), smp.Metric.Name, smp.LabelValues)
							if prev, ok := last[k]; ok && smp.Value < prev {
								t.Fatalf("%s fell from %v to %v at %s", k, prev, smp.Value, off)
							}
							last[k] = smp.Value
							seen++
						}
					}
					for _, j := range s.JobCPU {
						k := s.Hostname + " cpu " + j.Job
						if prev, ok := last[k]; ok && j.Seconds < prev {
							t.Fatalf("%s fell from %v to %v at %s", k, prev, j.Seconds, off)
						}
						last[k] = j.Seconds
					}
				}
			}
			if seen == 0 {
				t.Fatal("no counters seen")
			}
		})
	}
}

// No device publishes the same series twice; every published metric is an
// NVML or profiling metric of the catalogue.
func TestSeriesWellFormed(t *testing.T) {
	src, clk := newSimFrom(t, DefaultScenario(), 1)
	s := at(t, src, clk, 4*time.Hour)
	names := map[string]bool{}
	for _, snap := range s {
		for _, d := range snap.Devices {
			seen := map[string]bool{}
			for _, smp := range d.Samples {
				if smp.Metric.Origin != schema.OriginNVML && smp.Metric.Origin != schema.OriginGPM {
					t.Errorf("%s: unexpected origin %s", smp.Metric.Name, smp.Metric.Origin)
				}
				if len(smp.LabelValues) != len(smp.Metric.Labels) {
					t.Errorf("%s: %d label values for labels %v", smp.Metric.Name, len(smp.LabelValues), smp.Metric.Labels)
				}
				k := smp.Metric.Name + fmt.Sprint(smp.LabelValues)
				if seen[k] {
					t.Errorf("%s %s published twice", d.Key(), k)
				}
				seen[k] = true
				names[smp.Metric.Name] = true
			}
			if !reflect.DeepEqual(d.Capabilities, []string{"sim"}) {
				t.Errorf("capabilities %v", d.Capabilities)
			}
		}
	}
	// Every NVML and profiling metric a GPU can have is published somewhere
	// (XID counters appear once an XID happened). Process memory and the
	// per-holder series are rendered from processes, not device samples
	// (TestSharedGPUPublishesEachHoldersUse holds the latter).
	for _, m := range schema.All() {
		if (m.Origin == schema.OriginNVML || m.Origin == schema.OriginGPM) && m.PerGPU &&
			m != schema.GPUUp && m != schema.XIDErrors && m != schema.ProcessMemory &&
			!slices.Contains(schema.HolderUseMetrics, m) && !names[m.Name] {
			t.Errorf("%s never published", m.Name)
		}
	}
}

func TestRepeatReplaysWithNewJobIDs(t *testing.T) {
	src, clk := newSim(t, `
repeat: 10h
fleet: [{hostname: n, model: H200, gpus: 1}]
workloads:
  - {id: "77", user: u, team: t, node: n, gpus: [0], start: 1h, duration: 4h, behaviour: training}
`, 1)
	cases := []struct {
		off time.Duration
		job string
	}{{30 * time.Minute, ""}, {2 * time.Hour, "77"}, {6 * time.Hour, ""}, {12 * time.Hour, "77-r1"}, {32 * time.Hour, "77-r3"}}
	for _, c := range cases {
		s := at(t, src, clk, c.off)["n"]
		a := allocationsOn(s, gpu(t, s, 0).Key())
		got := ""
		if len(a) == 1 {
			got = a[0].JobID()
			if want := src.Origin().Add(c.off).Add(-(c.off - time.Hour) % (10 * time.Hour)); !a[0].Start.Equal(want) {
				t.Errorf("at %s: start %s, want %s", c.off, a[0].Start, want)
			}
		}
		if got != c.job {
			t.Errorf("at %s: job %q, want %q", c.off, got, c.job)
		}
	}
}

func TestMIGInstances(t *testing.T) {
	src, clk := newSim(t, `
fleet:
  - hostname: n
    model: A100-SXM4-80GB
    gpus: 2
    mig: [{gpu: 1, profiles: [3g.40gb, 2g.20gb, 1g.10gb]}]
workloads:
  - {id: "1", user: u, team: t, node: n, mig: {gpu: 1, instance: 2}, start: 0s, duration: 1d, behaviour: training,
     params: {memory_gib: 12}}
`, 1)
	s := at(t, src, clk, time.Hour)["n"]
	var inst []source.Device
	for _, d := range s.Devices {
		if d.MIG != nil {
			inst = append(inst, d)
		}
	}
	if len(inst) != 3 || inst[1].MIG.Profile != "2g.20gb" || inst[1].MIG.GIID != 2 || inst[1].Index != 1 {
		t.Fatalf("MIG instances %+v", inst)
	}
	if inst[1].UUID != gpu(t, s, 1).UUID {
		t.Error("a MIG instance must carry its parent's UUID")
	}
	a := allocationsOn(s, inst[1].Key())
	if len(a) != 1 || a[0].HPCJob != "1" {
		t.Errorf("allocation on the instance: %+v", a)
	}
	if fb := mustValue(t, &inst[1], schema.FBUsed); fb != 12*1024 {
		t.Errorf("instance FB used %v, want 12 GiB", fb)
	}
	if fb := mustValue(t, &inst[1], schema.FBFree); fb != 8*1024 {
		t.Errorf("instance FB free %v, want 8 GiB", fb)
	}
	if gr := mustValue(t, &inst[1], schema.ProfGrEngineActive); gr < 0.8 {
		t.Errorf("busy instance GR engine active %v", gr)
	}
	if _, ok := value(&inst[1], schema.GPUUtil); ok {
		t.Error("MIG instances have no GPU_UTIL (as with DCGM)")
	}
	if gr := mustValue(t, &inst[0], schema.ProfGrEngineActive); gr != 0 {
		t.Errorf("idle instance GR engine active %v", gr)
	}
	parent := gpu(t, s, 1)
	m, _ := LookupModel("A100-SXM4-80GB")
	if p := mustValue(t, parent, schema.PowerUsage); p < m.IdlePowerW+30 {
		t.Errorf("parent power %v W: a busy 2g instance should draw power", p)
	}
	if len(processesOn(s, inst[1].Key())) != 1 {
		t.Error("no process on the busy instance")
	}
}

// An orphan keeps its memory next to the job that gets its GPU next.
func TestOrphanBesideNewJob(t *testing.T) {
	src, clk := newSim(t, `
fleet: [{hostname: n, model: A100-SXM4-80GB, gpus: 1}]
workloads:
  - {id: "1", user: u, node: n, gpus: [0], start: 0s, duration: 1h, behaviour: orphan, params: {memory_gib: 10}}
  - {id: "2", user: v, node: n, gpus: [0], start: 2h, duration: 1h, behaviour: training, params: {memory_gib: 20}}
`, 1)
	s := at(t, src, clk, 150*time.Minute)["n"]
	d := gpu(t, s, 0)
	procs := processesOn(s, d.Key())
	if len(procs) != 2 || procs[0].Orphan == procs[1].Orphan {
		t.Fatalf("processes %+v, want the orphan and the new job's", procs)
	}
	if fb := mustValue(t, d, schema.FBUsed); fb != 30*1024 {
		t.Errorf("FB used %v MiB, want both holders' 30 GiB", fb)
	}
	if u := mustValue(t, d, schema.GPUUtil); u < 85 {
		t.Errorf("util %v: the new job trains", u)
	}
	if a := allocationsOn(s, d.Key()); len(a) != 1 || a[0].HPCJob != "2" {
		t.Errorf("allocations %+v, want only job 2", a)
	}
}
