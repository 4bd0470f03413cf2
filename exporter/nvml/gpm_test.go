package nvml

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuwatch/gpuwatch/schema"
)

// dcgmProf is DCGM's name and unit for each GPM metric: utilisations from
// percent to a ratio, throughput from MiB/s to bytes/s.
var dcgmProf = []struct {
	id    nvml.GpmMetricId
	m     *schema.Metric
	scale float64
}{
	{nvml.GPM_METRIC_GRAPHICS_UTIL, schema.ProfGrEngineActive, 1.0 / 100},
	{nvml.GPM_METRIC_SM_UTIL, schema.ProfSMActive, 1.0 / 100},
	{nvml.GPM_METRIC_SM_OCCUPANCY, schema.ProfSMOccupancy, 1.0 / 100},
	{nvml.GPM_METRIC_ANY_TENSOR_UTIL, schema.ProfTensorActive, 1.0 / 100},
	{nvml.GPM_METRIC_DRAM_BW_UTIL, schema.ProfDRAMActive, 1.0 / 100},
	{nvml.GPM_METRIC_FP64_UTIL, schema.ProfFP64Active, 1.0 / 100},
	{nvml.GPM_METRIC_FP32_UTIL, schema.ProfFP32Active, 1.0 / 100},
	{nvml.GPM_METRIC_FP16_UTIL, schema.ProfFP16Active, 1.0 / 100},
	{nvml.GPM_METRIC_PCIE_TX_PER_SEC, schema.ProfPCIeTX, 1024 * 1024},
	{nvml.GPM_METRIC_PCIE_RX_PER_SEC, schema.ProfPCIeRX, 1024 * 1024},
	{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, schema.ProfNVLinkTX, 1024 * 1024},
	{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, schema.ProfNVLinkRX, 1024 * 1024},
}

func profCount(got map[string]float64, g *fakeGPU) int {
	n := 0
	for k := range got {
		if strings.HasPrefix(k, "DCGM_FI_PROF_") && strings.Contains(k, g.dev.UUID) {
			n++
		}
	}
	return n
}

// checkProf asserts every PROF series of a GPU (or GPU instance) equals the
// fake's GPM output for the sample pair (t1, t2), converted to DCGM units.
func checkProf(t *testing.T, got map[string]float64, g *fakeGPU, giid, t1, t2 int, mig ...string) {
	t.Helper()
	for _, p := range dcgmProf {
		k := key(p.m, g, mig...)
		raw, ret := gpmValue(g.index, giid, p.id, t1, t2)
		v, ok := got[k]
		if ret != nvml.SUCCESS {
			if ok {
				t.Errorf("%s published though GPM does not support it", k)
			}
			continue
		}
		if !ok {
			t.Errorf("missing %s", k)
			continue
		}
		if want := raw * p.scale; v != want {
			t.Errorf("%s = %v, want %v", k, v, want)
		}
	}
}

func TestGPMMetricsFromTwoSamples(t *testing.T) {
	for _, sv := range []struct {
		name string
		new  func() *server.Server
	}{{"dgxh100", dgxh100.New}, {"dgxh200", dgxh200.New}} {
		t.Run(sv.name, func(t *testing.T) {
			f := newFake(t, sv.new(), fakeOptions{procs: 1, links: 18, gpm: true})
			noGPM := f.gpus[5]
			noGPM.gpm = false
			s := open(t, f, Options{})

			f.tick(1)
			got := series(collect(t, s))
			for _, g := range f.gpus {
				if n := profCount(got, g); n != 0 {
					t.Errorf("GPU %d: %d PROF series from one sample, want none", g.index, n)
				}
				_, hasGPM := got[key(schema.Capabilities, g, "source", "gpm")]
				if hasGPM != g.gpm {
					t.Errorf("GPU %d: gpm capability %v, want %v", g.index, hasGPM, g.gpm)
				}
			}
			f.tick(2)
			got = series(collect(t, s))
			for _, g := range f.gpus {
				if g == noGPM {
					continue
				}
				checkProf(t, got, g, -1, 1, 2)
			}
			// The second pair reuses the buffer of the last sample.
			f.tick(4)
			snap := collect(t, s)
			if len(snap.Errors) != 0 {
				t.Fatalf("errors: %v", snap.Errors)
			}
			got = series(snap)
			for _, g := range f.gpus {
				if g == noGPM {
					if n := profCount(got, g); n != 0 {
						t.Errorf("GPU without GPM publishes %d PROF series", n)
					}
					continue
				}
				checkProf(t, got, g, -1, 2, 4)
				// Everything of the NVML contract is still there.
				check(t, got, g, expected(g))
			}
			if n := len(f.samples); n != 2*7 {
				t.Errorf("%d GPM samples allocated for 7 GPUs over 3 cycles, want 14", n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			for i, smp := range f.samples {
				if !smp.freed {
					t.Errorf("sample %d not freed by Close", i)
				}
			}
		})
	}
}

func TestGPMPerMIGInstance(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{links: 18, gpm: true})
	f.addMIG(t, 1, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	s := open(t, f, Options{})
	f.tick(10)
	collect(t, s)
	f.tick(11)
	snap := collect(t, s)
	if len(snap.Errors) != 0 {
		t.Fatalf("errors: %v", snap.Errors)
	}
	got := series(snap)
	g := f.gpus[1]
	names := map[int]string{g.mig[0].giid: "1g.10gb", g.mig[1].giid: "3g.40gb"}
	for _, m := range g.mig {
		mig := []string{"GPU_I_PROFILE", names[m.giid], "GPU_I_ID", fmt.Sprint(m.giid)}
		checkProf(t, got, g, m.giid, 10, 11, mig...)
		if _, ok := got[key(schema.Capabilities, g, append(mig, "source", "gpm")...)]; !ok {
			t.Errorf("GPU instance %d lacks the gpm capability", m.giid)
		}
	}
	checkProf(t, got, g, -1, 10, 11) // the whole GPU, NVLink included
	if n := len(f.samples); n != 2*(8+2) {
		t.Errorf("%d GPM samples, want 20 (two per GPU and per GPU instance)", n)
	}
}

func TestGPMSampleFailureKeepsPreviousSample(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{gpm: true})
	g := f.gpus[0]
	s := open(t, f, Options{})
	f.tick(1)
	collect(t, s)
	ok := g.dev.GpmSampleGetFunc
	g.dev.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.ERROR_UNKNOWN }
	f.tick(2)
	snap := collect(t, s)
	if len(snap.Errors) != 1 || snap.Errors[0].Field != "gpm" || snap.Errors[0].DeviceKey != g.dev.UUID {
		t.Fatalf("errors = %v, want one gpm error on GPU 0", snap.Errors)
	}
	got := series(snap)
	if n := profCount(got, g); n != 0 {
		t.Errorf("%d PROF series after a failed sample", n)
	}
	checkProf(t, got, f.gpus[1], -1, 1, 2)
	check(t, got, g, expected(g))
	g.dev.GpmSampleGetFunc = ok
	f.tick(3)
	checkProf(t, series(collect(t, s)), g, -1, 1, 3)
}

func TestGPMUnsupportedMetricIsLeftOut(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{gpm: true})
	get := f.srv.GpmMetricsGetFunc
	f.srv.GpmMetricsGetFunc = func(q *nvml.GpmMetricsGetType) nvml.Return {
		ret := get(q)
		for i := 0; i < int(q.NumMetrics); i++ {
			if nvml.GpmMetricId(q.Metrics[i].MetricId) == nvml.GPM_METRIC_FP64_UTIL {
				q.Metrics[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return ret
	}
	s := open(t, f, Options{})
	for i := 1; i <= 3; i++ {
		f.tick(i)
		got := series(collect(t, s))
		if i == 1 {
			continue
		}
		for _, g := range f.gpus {
			if _, ok := got[key(schema.ProfFP64Active, g)]; ok {
				t.Fatalf("cycle %d: unsupported FP64 activity published", i)
			}
			if _, ok := got[key(schema.ProfSMActive, g)]; !ok {
				t.Fatalf("cycle %d: SM activity missing", i)
			}
		}
	}
}

func TestGPMDisabled(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{gpm: true})
	s := open(t, f, Options{DisableGPM: true})
	f.tick(1)
	collect(t, s)
	f.tick(2)
	got := series(collect(t, s))
	for _, g := range f.gpus {
		if n := profCount(got, g); n != 0 {
			t.Errorf("GPU %d: %d PROF series with GPM disabled", g.index, n)
		}
	}
	if len(f.samples) != 0 {
		t.Errorf("%d GPM samples allocated with GPM disabled", len(f.samples))
	}
}

// TestGPMPathAllocatesNothing compares the allocations of a cycle with and
// without GPM on the same fleet: GPM must add none.
func TestGPMPathAllocatesNothing(t *testing.T) {
	allocs := func(gpm bool) float64 {
		f := newFake(t, dgxh100.New(), fakeOptions{procs: 4, links: 18, gpm: true})
		s := open(t, f, Options{DisableGPM: !gpm, DisableXID: true})
		tick := 0
		step := func() {
			tick++
			f.tick(tick)
			if _, err := s.Collect(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			step()
		}
		// The go-nvml mocks record every call in a growing slice; over
		// 2000 runs that amortises below one allocation per cycle, and
		// AllocsPerRun rounds down.
		return testing.AllocsPerRun(2000, step)
	}
	without, with := allocs(false), allocs(true)
	t.Logf("allocs per cycle: %.1f without GPM, %.1f with", without, with)
	if with-without >= 1 {
		t.Errorf("GPM adds %.1f allocations per cycle, want 0", with-without)
	}
}

func benchCollect(b *testing.B, gpm bool) {
	f := newFake(b, dgxh100.New(), fakeOptions{procs: 4, links: 18, gpm: true})
	s := open(b, f, Options{DisableGPM: !gpm, DisableXID: true})
	ctx := context.Background()
	tick := 1
	f.tick(tick)
	if _, err := s.Collect(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tick++
		f.tick(tick)
		if _, err := s.Collect(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollect8GPU is one collection cycle of an 8-GPU H100 node with 4
// processes per GPU and 18 NVLink links, against the go-nvml mock.
func BenchmarkCollect8GPU(b *testing.B) { benchCollect(b, false) }

// BenchmarkCollect8GPUWithGPM is the same cycle with GPM profiling on.
func BenchmarkCollect8GPUWithGPM(b *testing.B) { benchCollect(b, true) }

// BenchmarkGPMOverhead alternates cycles without and with GPM in one run
// and reports the median of the per-pair ratios as how much GPM adds, in
// percent (target: under 20). Pairs and a median keep a shared, busy
// machine's load spikes out of the figure.
func BenchmarkGPMOverhead(b *testing.B) {
	mk := func(gpm bool) (*fake, *Source) {
		f := newFake(b, dgxh100.New(), fakeOptions{procs: 4, links: 18, gpm: true})
		return f, open(b, f, Options{DisableGPM: !gpm, DisableXID: true})
	}
	fa, sa := mk(false)
	fb, sb := mk(true)
	ctx := context.Background()
	ratios := make([]float64, 0, 1024)
	tick := 0
	for b.Loop() {
		tick++
		fa.tick(tick)
		fb.tick(tick)
		t0 := time.Now()
		if _, err := sa.Collect(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := sb.Collect(ctx); err != nil {
			b.Fatal(err)
		}
		if tick > 2 { // GPM computes from the second cycle on
			ratios = append(ratios, float64(time.Since(t1))/float64(t1.Sub(t0)))
		}
	}
	if len(ratios) > 0 {
		sort.Float64s(ratios)
		b.ReportMetric(100*(ratios[len(ratios)/2]-1), "gpm-overhead-%")
	}
}
