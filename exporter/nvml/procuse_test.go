package nvml

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// attribute does what the attribution chain does for the processes of a
// time-sliced GPU 0: pids 1000 and 1001 are pod a's, 1002 and 1003 pod b's,
// and pod c holds a replica of the GPU with no process at all.
func attribute(snap *source.Snapshot, g *fakeGPU) {
	owner := map[int]string{1000: "ml/a", 1001: "ml/a", 1002: "ml/b", 1003: "ml/b"}
	for i := range snap.Processes {
		snap.Processes[i].Job = owner[snap.Processes[i].PID]
	}
	for _, pod := range []string{"a", "b", "c"} {
		snap.Allocations = append(snap.Allocations, source.Allocation{DeviceKey: g.dev.UUID,
			Scheduler: schema.SchedulerKubernetes, Pod: pod, Namespace: "ml", Container: "main"})
	}
}

func holderKey(m *schema.Metric, g *fakeGPU, pod string) string {
	return key(m, g, "pod", pod, "namespace", "ml", "job_id", "ml/"+pod)
}

func TestProcessUseIsSummedPerHolder(t *testing.T) {
	f := newFake(t, dgxa100.New(), fakeOptions{procs: 4, procUse: true})
	g := f.gpus[0]
	// The driver keeps several samples per process between two reads, and
	// one of a process that has exited since the listing.
	g.procUse = []nvml.ProcessUtilizationSample{
		{Pid: 1000, TimeStamp: 100, SmUtil: 20, MemUtil: 10, EncUtil: 0, DecUtil: 4},
		{Pid: 1000, TimeStamp: 200, SmUtil: 40, MemUtil: 30, EncUtil: 2, DecUtil: 0},
		{Pid: 1001, TimeStamp: 150, SmUtil: 15, MemUtil: 5},
		{Pid: 1002, TimeStamp: 160, SmUtil: 0, MemUtil: 0},
		{Pid: 4242, TimeStamp: 210, SmUtil: 90, MemUtil: 90},
	}
	s := open(t, f, Options{})
	snap := collect(t, s)
	if !snap.Devices[0].ProcessUse {
		t.Fatal("device 0: ProcessUse false after a successful read")
	}
	attribute(snap, g)
	got := series(snap)
	procMem := func(pids ...int) float64 {
		var sum float64
		for _, p := range g.compute {
			for _, pid := range pids {
				if int(p.Pid) == pid {
					sum += float64(p.UsedGpuMemory)
				}
			}
		}
		return sum
	}
	for _, w := range []struct {
		m   *schema.Metric
		pod string
		v   float64
	}{
		// pid 1000 averaged over its two samples (30 %), plus pid 1001 (15 %).
		{schema.HolderSMUtil, "a", 0.45},
		{schema.HolderMemUtil, "a", 0.25},
		{schema.HolderEncUtil, "a", 0.01},
		{schema.HolderDecUtil, "a", 0.02},
		{schema.HolderMemory, "a", procMem(1000, 1001)},
		// pid 1002 sampled idle, pid 1003 not sampled at all.
		{schema.HolderSMUtil, "b", 0},
		{schema.HolderMemory, "b", procMem(1002, 1003)},
		// A holder with no process uses nothing, and says so.
		{schema.HolderSMUtil, "c", 0},
		{schema.HolderMemory, "c", 0},
	} {
		k := holderKey(w.m, g, w.pod)
		v, ok := got[k]
		if !ok {
			t.Errorf("missing %s", k)
			continue
		}
		if diff := v - w.v; diff > 1e-9 || diff < -1e-9 {
			t.Errorf("%s = %v, want %v", k, v, w.v)
		}
	}
	if n := countSeries(got, schema.HolderSMUtil.Name); n != 3 {
		t.Errorf("%d holder SM series, want 3 (one per holder, none per PID)", n)
	}
	// Every GPU was sampled: each says so, holders or not.
	for i := range snap.Devices {
		if !slices.Contains(snap.Devices[i].Capabilities, schema.CapabilityProcessUtilization) {
			t.Errorf("GPU %d: capabilities %v lack process_utilization", i, snap.Devices[i].Capabilities)
		}
	}
	if _, ok := got[key(schema.Capabilities, f.gpus[1], "source", schema.CapabilityProcessUtilization)]; !ok {
		t.Error("GPU 1: no gpuwatch_exporter_capabilities series for process_utilization")
	}
}

func TestProcessUseReadsOnlyNewSamples(t *testing.T) {
	f := newFake(t, dgxa100.New(), fakeOptions{procs: 4, procUse: true})
	g := f.gpus[0]
	g.procUse = []nvml.ProcessUtilizationSample{{Pid: 1000, TimeStamp: 500, SmUtil: 80}}
	s := open(t, f, Options{})
	collect(t, s)
	// Next cycle: the old sample again (a driver that returns it) and nothing
	// newer: pod a was idle since, not still at 80 %.
	snap := collect(t, s)
	if len(g.useCalls) != 2 || g.useCalls[0] != 0 || g.useCalls[1] != 500 {
		t.Fatalf("lastSeenTimestamp per call = %v, want [0 500]", g.useCalls)
	}
	attribute(snap, g)
	got := series(snap)
	if v, ok := got[holderKey(schema.HolderSMUtil, g, "a")]; !ok || v != 0 {
		t.Errorf("pod a SM after a cycle without samples = %v (present %v), want 0", v, ok)
	}
	// A newer sample is read and the timestamp moves on.
	g.procUse = append(g.procUse, nvml.ProcessUtilizationSample{Pid: 1002, TimeStamp: 900, SmUtil: 60})
	snap = collect(t, s)
	attribute(snap, g)
	got = series(snap)
	if v := got[holderKey(schema.HolderSMUtil, g, "b")]; v != 0.6 {
		t.Errorf("pod b SM = %v, want 0.6", v)
	}
	if v := got[holderKey(schema.HolderSMUtil, g, "a")]; v != 0 {
		t.Errorf("pod a SM = %v, want 0 (its sample was read last cycle)", v)
	}
}

func TestProcessUseUnavailablePublishesNothing(t *testing.T) {
	f := newFake(t, dgxa100.New(), fakeOptions{procs: 4, procUse: true})
	f.gpus[1].useRet = nvml.ERROR_NOT_SUPPORTED // an old driver
	f.gpus[2].useRet = nvml.ERROR_UNKNOWN       // a failing read
	f.gpus[3].compute = []nvml.ProcessInfo{{Pid: 7, GpuInstanceId: 0xFFFFFFFF}}
	f.addMIG(t, 3, nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	s := open(t, f, Options{})
	var snap *source.Snapshot
	for range 2 {
		snap = collect(t, s)
	}
	if n := len(f.gpus[1].useCalls); n != 1 {
		t.Errorf("GPU 1: NOT_SUPPORTED asked %d times, want once", n)
	}
	if n := len(f.gpus[3].useCalls); n != 0 {
		t.Errorf("GPU 3 (MIG): asked %d times, want never", n)
	}
	var failed int
	for _, e := range snap.Errors {
		if e.Field == schema.FieldProcessUtilization && e.DeviceKey == f.gpus[2].dev.UUID {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("GPU 2: %d process_utilization errors in the cycle, want 1: %v", failed, snap.Errors)
	}
	for i := range snap.Processes {
		snap.Processes[i].Job = "ml/a"
	}
	for gpu := range 4 {
		g := f.gpus[gpu]
		snap.Allocations = append(snap.Allocations, source.Allocation{DeviceKey: g.dev.UUID,
			Scheduler: schema.SchedulerKubernetes, Pod: "a", Namespace: "ml"})
	}
	got := series(snap)
	for _, gpu := range []int{1, 2, 3} {
		g := f.gpus[gpu]
		for _, m := range schema.HolderUseMetrics {
			for k := range got {
				if hasPrefixAndUUID(k, m.Name, g.dev.UUID) {
					t.Errorf("GPU %d: %s published without per-process use", gpu, k)
				}
			}
		}
		for _, d := range snap.Devices {
			if d.UUID == g.dev.UUID && (d.ProcessUse || slices.Contains(d.Capabilities, schema.CapabilityProcessUtilization)) {
				t.Errorf("GPU %d (%s): claims process_utilization: %v", gpu, d.Key(), d.Capabilities)
			}
		}
	}
	// GPU 0 still has its holder.
	if _, ok := got[holderKey(schema.HolderSMUtil, f.gpus[0], "a")]; !ok {
		t.Error("GPU 0 lost its holder series to the faults of others")
	}
}

func hasPrefixAndUUID(k, name, uuid string) bool {
	return strings.HasPrefix(k, name+"{") && strings.Contains(k, fmt.Sprintf("UUID=%q", uuid))
}

func countSeries(got map[string]float64, name string) int {
	n := 0
	for k := range got {
		if strings.HasPrefix(k, name+"{") {
			n++
		}
	}
	return n
}

// TestProcessUseCollectionTime measures a collection (source read and
// rendering, every process its own holder) of an 8-GPU node with 32
// processes per GPU (a densely time-sliced node) against 1 process per GPU,
// in one run, alternating, so the ratio does not depend on the machine.
// UPDATE=1 writes the figure to testdata/process-use-timing.txt.
func TestProcessUseCollectionTime(t *testing.T) {
	one := open(t, newFake(t, dgxa100.New(), fakeOptions{procs: 1, procUse: true}), Options{DisableXID: true})
	many := open(t, newFake(t, dgxa100.New(), fakeOptions{procs: 32, procUse: true}), Options{DisableXID: true})
	snap := collect(t, many)
	if len(snap.Processes) != 8*32 || !snap.Devices[0].ProcessUse {
		t.Fatalf("%d processes, process use %v; want 256 sampled", len(snap.Processes), snap.Devices[0].ProcessUse)
	}
	// Every process its own holder: the most holder series a GPU can have.
	jobs := make([]string, 32*1000)
	for i := range jobs {
		jobs[i] = fmt.Sprintf("ml/p%d", i)
	}
	cycle := func(s *Source) time.Duration {
		start := time.Now()
		snap := collect(t, s)
		for i := range snap.Processes {
			snap.Processes[i].Job = jobs[snap.Processes[i].PID%len(jobs)]
		}
		collector.Render(snap)
		return time.Since(start)
	}
	const rounds = 1000
	var tOne, tMany time.Duration
	for range rounds {
		tOne += cycle(one)
		tMany += cycle(many)
	}
	ratio := float64(tMany) / float64(tOne)
	line := fmt.Sprintf("8 GPUs, collection and rendering with 32 processes per GPU / 1 process per GPU (per-process use on): %.2fx "+
		"(%.1f µs / %.1f µs per cycle, %d rounds, go-nvml dgxa100 mock)\n",
		ratio, float64(tMany.Microseconds())/rounds, float64(tOne.Microseconds())/rounds, rounds)
	t.Log(line)
	if os.Getenv("UPDATE") == "1" {
		if err := os.WriteFile(filepath.Join("testdata", "process-use-timing.txt"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
