package nvml

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

const host = "node-a"

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func open(t testing.TB, f *fake, opts Options) *Source {
	t.Helper()
	opts.Hostname = host
	opts.Clock = fixedClock{time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	if opts.EventWait == 0 {
		opts.EventWait = 5 * time.Millisecond
	}
	s, err := New(f.srv, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func collect(t testing.TB, s *Source) *source.Snapshot {
	t.Helper()
	snap, err := s.Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return snap
}

// want is a series expectation: metric, extra label pairs, value.
type want struct {
	m     *schema.Metric
	extra []string
	v     float64
}

// expected lists what one GPU of the fake must publish, computed from the
// fake's values by the contract's units, independent of the source's code.
func expected(g *fakeGPU) []want {
	sumLinks := func(base uint64) float64 {
		var s uint64
		for l := 0; l < g.links; l++ {
			s += base + uint64(l)
		}
		return float64(s)
	}
	w := []want{
		{schema.GPUUp, nil, 1},
		{schema.Capabilities, []string{"source", "nvml"}, 1},
		{schema.GPUUtil, nil, float64(g.util.Gpu)},
		{schema.MemCopyUtil, nil, float64(g.util.Memory)},
		{schema.EncUtil, nil, float64(g.enc)},
		{schema.DecUtil, nil, float64(g.dec)},
		{schema.FBUsed, nil, float64(1000 + g.index)}, // (1000+i) MiB + 123 bytes
		{schema.FBReserved, nil, 512},
		{schema.FBFree, nil, float64((g.mem.Total - g.mem.Used - g.mem.Reserved) >> 20)},
		{schema.GPUTemp, nil, float64(g.temp)},
		{schema.MemoryTemp, nil, float64(g.memTemp)},
		{schema.PowerUsage, nil, 250.5 + float64(g.index)},
		{schema.PowerLimit, nil, 700},
		{schema.TotalEnergy, nil, float64(g.energy)},
		{schema.SMClock, nil, float64(g.smClk)},
		{schema.MemClock, nil, float64(g.memClk)},
		{schema.ClockEvents, nil, float64(g.reasons)},
		{schema.PowerViolation, nil, float64(g.powerViol)},
		{schema.ThermViolation, nil, float64(g.thermViol)},
		{schema.ECCSBEVol, nil, float64(g.ecc[0][0])},
		{schema.ECCSBEAgg, nil, float64(g.ecc[0][1])},
		{schema.ECCDBEVol, nil, float64(g.ecc[1][0])},
		{schema.ECCDBEAgg, nil, float64(g.ecc[1][1])},
		{schema.RetiredSBE, nil, 2},
		{schema.RetiredDBE, nil, 1},
		{schema.RetiredPending, nil, boolValue(g.retiredPending)},
		{schema.RemapCorr, nil, float64(g.remapCorr)},
		{schema.RemapUncorr, nil, float64(g.remapUnc)},
		{schema.RemapPending, nil, 0},
		{schema.RemapFailure, nil, boolValue(g.remapFailed)},
		{schema.PCIeReplay, nil, float64(g.pcieReplay)},
		{schema.XIDLast, nil, 0},
	}
	for name, bit := range map[string]uint64{
		"gpu_idle": 1, "applications_clocks_setting": 2, "sw_power_cap": 4, "hw_slowdown": 8, "sync_boost": 16,
		"sw_thermal_slowdown": 32, "hw_thermal_slowdown": 64, "hw_power_brake_slowdown": 128, "display_clock_setting": 256,
	} {
		w = append(w, want{schema.ClockEventActive, []string{"reason", name}, boolValue(g.reasons&bit != 0)})
	}
	if g.links > 0 {
		w = append(w,
			want{schema.NVLinkCRCFlit, nil, sumLinks(g.nvlinkErr[nvml.NVLINK_ERROR_DL_CRC_FLIT])},
			want{schema.NVLinkCRCData, nil, sumLinks(g.nvlinkErr[nvml.NVLINK_ERROR_DL_CRC_DATA])},
			want{schema.NVLinkReplay, nil, sumLinks(g.nvlinkErr[nvml.NVLINK_ERROR_DL_REPLAY])},
			want{schema.NVLinkRecovery, nil, sumLinks(g.nvlinkErr[nvml.NVLINK_ERROR_DL_RECOVERY])},
			want{schema.NVLinkBW, nil, sumLinks(g.nvlinkTX) + sumLinks(g.nvlinkRX)})
	}
	for _, p := range g.compute {
		w = append(w, want{schema.ProcessMemory, []string{"pid", fmt.Sprint(p.Pid), "type", "compute"}, float64(p.UsedGpuMemory)})
	}
	return w
}

func check(t *testing.T, got map[string]float64, g *fakeGPU, ws []want, mig ...string) {
	t.Helper()
	for _, w := range ws {
		extra := append(append([]string{}, mig...), w.extra...)
		k := key(w.m, g, extra...)
		v, ok := got[k]
		if !ok {
			t.Errorf("missing %s", k)
			continue
		}
		if v != w.v {
			t.Errorf("%s = %v, want %v", k, v, w.v)
		}
	}
}

// countFor counts the series of a GPU (all of its MIG instances included).
func countFor(got map[string]float64, g *fakeGPU) int {
	n := 0
	for k := range got {
		if strings.Contains(k, g.dev.UUID) {
			n++
		}
	}
	return n
}

func servers() []struct {
	name string
	new  func() *server.Server
} {
	return []struct {
		name string
		new  func() *server.Server
	}{{"dgxa100", dgxa100.New}, {"dgxh100", dgxh100.New}, {"dgxh200", dgxh200.New}}
}

func TestCollectPublishesMockValuesInContractUnits(t *testing.T) {
	for _, sv := range servers() {
		for _, links := range []int{0, 4} {
			t.Run(fmt.Sprintf("%s/links=%d", sv.name, links), func(t *testing.T) {
				f := newFake(t, sv.new(), fakeOptions{procs: 4, links: links})
				s := open(t, f, Options{})
				snap := collect(t, s)
				if len(snap.Devices) != 8 {
					t.Fatalf("devices = %d, want 8", len(snap.Devices))
				}
				if len(snap.Errors) != 0 {
					t.Fatalf("errors: %v", snap.Errors)
				}
				got := series(snap)
				for _, g := range f.gpus {
					ws := expected(g)
					check(t, got, g, ws)
					// Nothing more than expected: no PROF series without GPM,
					// no NVLink series without links.
					if n := countFor(got, g); n != len(ws) {
						t.Errorf("GPU %d: %d series, want %d", g.index, n, len(ws))
					}
				}
				if len(snap.Processes) != 32 {
					t.Errorf("processes = %d, want 32", len(snap.Processes))
				}
			})
		}
	}
}

func TestPCIBusIDFallsBackToDomainBusDevice(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{})
	f.gpus[2].dev.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		return nvml.PciInfo{Domain: 0, Bus: 0x1b, Device: 0}, nvml.SUCCESS
	}
	s := open(t, f, Options{})
	snap := collect(t, s)
	if got := snap.Devices[2].PCIBusID; got != "00000000:1b:00.0" {
		t.Errorf("bus id = %q, want 00000000:1b:00.0", got)
	}
	if got := snap.Devices[1].PCIBusID; got != f.gpus[1].dev.PciBusID {
		t.Errorf("bus id = %q, want %q", got, f.gpus[1].dev.PciBusID)
	}
}

func TestNoDriverStopsAfterInit(t *testing.T) {
	srv := dgxh100.New()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	_, err := New(srv, Options{})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "libnvidia-ml.so.1") {
		t.Errorf("message %q does not name libnvidia-ml.so.1", err)
	}
	// Any NVML call after a failed Init kills a real process.
	if n := len(srv.DeviceGetCountCalls()) + len(srv.ShutdownCalls()) + len(srv.EventSetCreateCalls()); n != 0 {
		t.Errorf("%d NVML calls after a failed Init", n)
	}

	srv = dgxh100.New()
	srv.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
	if _, err := New(srv, Options{}); err == nil || errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), "ERROR_DRIVER_NOT_LOADED") {
		t.Errorf("driver not loaded: err = %v", err)
	}
}

func TestFaultsStayOnTheirGPU(t *testing.T) {
	cases := []struct {
		name     string
		break_   func(f *fake)
		down     map[int]bool
		errField map[int]string // GPU -> field reported as FieldError
		missing  map[int][]*schema.Metric
	}{
		{
			name: "lost on memory",
			break_: func(f *fake) {
				f.gpus[1].dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST }
			},
			down: map[int]bool{1: true},
		},
		{
			name: "lost mid-device, field unknown elsewhere",
			break_: func(f *fake) {
				f.gpus[4].dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
				f.gpus[6].dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_UNKNOWN }
			},
			down:     map[int]bool{4: true},
			errField: map[int]string{6: "utilization"},
			missing:  map[int][]*schema.Metric{6: {schema.GPUUtil, schema.MemCopyUtil}},
		},
		{
			name: "must-have call fails",
			break_: func(f *fake) {
				f.gpus[0].dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_UNKNOWN }
			},
			down:     map[int]bool{0: true},
			errField: map[int]string{0: "memory"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, dgxa100.New(), fakeOptions{procs: 2})
			s := open(t, f, Options{})
			tc.break_(f)
			snap := collect(t, s)
			got := series(snap)
			for _, g := range f.gpus {
				up := got[key(schema.GPUUp, g)]
				if tc.down[g.index] {
					if up != 0 {
						t.Errorf("GPU %d up = %v, want 0", g.index, up)
					}
					// Only gpu_up and capabilities remain for a lost GPU.
					if n := countFor(got, g); n != 2 {
						t.Errorf("lost GPU %d has %d series, want 2", g.index, n)
					}
					continue
				}
				ws := expected(g)
				for _, m := range tc.missing[g.index] {
					var keep []want
					for _, w := range ws {
						if w.m != m {
							keep = append(keep, w)
						}
					}
					ws = keep
					if _, ok := got[key(m, g)]; ok {
						t.Errorf("GPU %d publishes failed field %s", g.index, m.Name)
					}
				}
				check(t, got, g, ws)
			}
			var fields []string
			for _, e := range snap.Errors {
				fields = append(fields, e.Field)
			}
			for gpu, fld := range tc.errField {
				found := false
				for _, e := range snap.Errors {
					if e.Field == fld && e.DeviceKey == f.gpus[gpu].dev.UUID {
						found = true
					}
				}
				if !found {
					t.Errorf("no FieldError %q for GPU %d; errors: %v", fld, gpu, fields)
				}
			}
			if len(snap.Errors) != len(tc.errField) {
				t.Errorf("errors = %v, want %d", snap.Errors, len(tc.errField))
			}
			// A lost GPU's processes are not published either.
			for _, p := range snap.Processes {
				for gpu := range tc.down {
					if p.DeviceKey == f.gpus[gpu].dev.UUID {
						t.Errorf("process %d of lost GPU %d published", p.PID, gpu)
					}
				}
			}
		})
	}
}

func TestUnsupportedFieldsAreAbsentAndAskedOnce(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{})
	g := f.gpus[3]
	g.dev.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	g.dev.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	g.dev.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	g.dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{}, nvml.ERROR_FUNCTION_NOT_FOUND }
	g.dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: g.mem.Total, Used: g.mem.Used, Free: g.mem.Free}, nvml.SUCCESS
	}
	g.dev.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_FUNCTION_NOT_FOUND }
	s := open(t, f, Options{})
	var snap *source.Snapshot
	for range 3 {
		snap = collect(t, s)
	}
	if len(snap.Errors) != 0 {
		t.Fatalf("unsupported fields reported as errors: %v", snap.Errors)
	}
	got := series(snap)
	gone := map[*schema.Metric]bool{schema.PCIeReplay: true, schema.RetiredSBE: true, schema.RetiredDBE: true,
		schema.RetiredPending: true, schema.FBReserved: true}
	var ws []want
	for _, w := range expected(g) {
		if gone[w.m] {
			if _, ok := got[key(w.m, g)]; ok {
				t.Errorf("unsupported %s published", w.m.Name)
			}
			continue
		}
		ws = append(ws, w)
	}
	check(t, got, g, ws) // clock events from the older call, memory from v1
	check(t, got, f.gpus[2], expected(f.gpus[2]))
	for name, n := range map[string]int{
		"GetPcieReplayCounter":         len(g.dev.GetPcieReplayCounterCalls()),
		"GetRetiredPages":              len(g.dev.GetRetiredPagesCalls()),
		"GetMemoryInfo_v2":             len(g.dev.GetMemoryInfo_v2Calls()),
		"GetCurrentClocksEventReasons": len(g.dev.GetCurrentClocksEventReasonsCalls()),
	} {
		want := 1
		if name == "GetRetiredPages" {
			want = 2 // one per cause
		}
		if n != want {
			t.Errorf("%s called %d times in 3 cycles, want %d", name, n, want)
		}
	}
}

func TestXIDEventsCount(t *testing.T) {
	f := newFake(t, dgxa100.New(), fakeOptions{})
	s := open(t, f, Options{})
	f.xid(2, 79)
	f.xid(2, 48)
	f.xid(2, 79)
	f.xid(5, 13)
	deadline := time.Now().Add(5 * time.Second)
	var got map[string]float64
	for {
		got = series(collect(t, s))
		if got[key(schema.XIDErrors, f.gpus[5], "xid", "13")] == 1 &&
			got[key(schema.XIDErrors, f.gpus[2], "xid", "79")] == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("XID events not counted: %v", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range []struct {
		gpu    int
		labels []string
		m      *schema.Metric
		v      float64
	}{
		{2, []string{"xid", "79"}, schema.XIDErrors, 2},
		{2, []string{"xid", "48"}, schema.XIDErrors, 1},
		{2, nil, schema.XIDLast, 79},
		{5, nil, schema.XIDLast, 13},
		{0, nil, schema.XIDLast, 0},
	} {
		k := key(w.m, f.gpus[w.gpu], w.labels...)
		if got[k] != w.v {
			t.Errorf("%s = %v, want %v", k, got[k], w.v)
		}
	}
	if _, ok := got[key(schema.XIDErrors, f.gpus[0], "xid", "79")]; ok {
		t.Error("XID counted on the wrong GPU")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Collect(context.Background()); err == nil {
		t.Error("Collect after Close succeeded")
	}
}

func TestXIDUnsupportedLeavesGaugeOut(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{})
	f.gpus[1].dev.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	s := open(t, f, Options{})
	got := series(collect(t, s))
	if _, ok := got[key(schema.XIDLast, f.gpus[1])]; ok {
		t.Error("XID gauge published for a GPU without XID events")
	}
	if _, ok := got[key(schema.XIDLast, f.gpus[0])]; !ok {
		t.Error("XID gauge missing on a GPU with XID events")
	}
}

func TestCollectHonoursContext(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{})
	s := open(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Collect(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestMIGInstancesHaveTheirOwnSeries(t *testing.T) {
	f := newFake(t, dgxa100.New(), fakeOptions{procs: 1})
	f.addMIG(t, 0, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE)
	g := f.gpus[0]
	// One process in each GPU instance, one without.
	g.compute = []nvml.ProcessInfo{
		{Pid: 41, UsedGpuMemory: 1 * mib, GpuInstanceId: uint32(g.mig[0].giid)},
		{Pid: 42, UsedGpuMemory: 2 * mib, GpuInstanceId: uint32(g.mig[1].giid)},
		{Pid: 43, UsedGpuMemory: 3 * mib, GpuInstanceId: 0xFFFFFFFF},
	}
	s := open(t, f, Options{})
	snap := collect(t, s)
	if len(snap.Devices) != 10 {
		t.Fatalf("devices = %d, want 8 GPUs + 2 GPU instances", len(snap.Devices))
	}
	got := series(snap)
	profiles := map[int]string{g.mig[0].giid: "1g.5gb", g.mig[1].giid: "3g.20gb"}
	for k, m := range g.mig {
		mig := []string{"GPU_I_PROFILE", profiles[m.giid], "GPU_I_ID", fmt.Sprint(m.giid)}
		ws := []want{
			{schema.GPUUp, nil, 1},
			{schema.Capabilities, []string{"source", "nvml"}, 1},
			{schema.FBUsed, nil, float64(100 + m.giid)},
			{schema.FBFree, nil, float64(m.mem.Free >> 20)},
			{schema.ProcessMemory, []string{"pid", fmt.Sprint(41 + k), "type", "compute"}, float64(k+1) * mib},
		}
		check(t, got, g, ws, mig...)
	}
	// The parent GPU keeps its own series, with the process outside any instance.
	check(t, got, g, []want{
		{schema.GPUTemp, nil, float64(g.temp)},
		{schema.ProcessMemory, []string{"pid", "43", "type", "compute"}, 3 * mib},
	})
	if _, ok := got[key(schema.ProcessMemory, g, "pid", "41", "type", "compute")]; ok {
		t.Error("process of a GPU instance published on the parent GPU")
	}
}

func TestMIGProfileNames(t *testing.T) {
	const gib = 1 << 30
	cases := []struct {
		profile int
		slices  uint32
		memMiB  uint64
		total   uint64
		want    string
	}{
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 4864, 40 * gib, "1g.5gb"},
		{nvml.GPU_INSTANCE_PROFILE_7_SLICE, 7, 40192, 40 * gib, "7g.40gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE, 1, 9856, 81559 * mib, "1g.10gb"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 1, 9856, 81559 * mib, "1g.10gb+me"},
		{nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, 1, 19968, 81559 * mib, "1g.20gb"},
		{nvml.GPU_INSTANCE_PROFILE_3_SLICE, 3, 40192, 81559 * mib, "3g.40gb"},
		{nvml.GPU_INSTANCE_PROFILE_2_SLICE, 2, 10240, 0, "2g.10gb"}, // total unknown
	}
	for _, c := range cases {
		info := nvml.GpuInstanceProfileInfo{SliceCount: c.slices, MemorySizeMB: c.memMiB}
		if got := migProfileName(c.profile, info, c.total); got != c.want {
			t.Errorf("profile %d %d MiB of %d: %q, want %q", c.profile, c.memMiB, c.total, got, c.want)
		}
	}
}

func TestIdentityFailureAtStartIsRetried(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{links: 2})
	g := f.gpus[4]
	uuid := g.dev.GetUUIDFunc
	g.dev.GetUUIDFunc = func() (string, nvml.Return) { return "", nvml.ERROR_UNKNOWN }
	s := open(t, f, Options{})
	snap := collect(t, s)
	if d := snap.Devices[4]; d.Up || d.UUID != "" || d.Index != 4 {
		t.Errorf("unidentified GPU = %+v, want down, index 4, no UUID", d)
	}
	check(t, series(snap), f.gpus[3], expected(f.gpus[3]))
	g.dev.GetUUIDFunc = uuid
	got := series(collect(t, s))
	check(t, got, g, expected(g)) // NVLink included: links enumerated late
	if n := countFor(got, g); n != len(expected(g)) {
		t.Errorf("late GPU: %d series, want %d", n, len(expected(g)))
	}
}

func TestXIDWaitErrorsBackOffAndCloseStops(t *testing.T) {
	f := newFake(t, dgxh100.New(), fakeOptions{})
	var set *mock.EventSet
	f.srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set = &mock.EventSet{
			WaitFunc: func(uint32) (nvml.EventData, nvml.Return) { return nvml.EventData{}, nvml.ERROR_UNKNOWN },
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		}
		return set, nvml.SUCCESS
	}
	s := open(t, f, Options{})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s while the event wait was failing", d)
	}
	if n := len(set.WaitCalls()); n > 2 {
		t.Errorf("failing event wait retried %d times in 200ms; want a back-off", n)
	}
	if len(set.FreeCalls()) != 1 {
		t.Errorf("event set freed %d times, want 1", len(set.FreeCalls()))
	}
}

// TestClockEventBitsMatchNVML holds the catalogue's reason bits to go-nvml's constants.
func TestClockEventBitsMatchNVML(t *testing.T) {
	want := map[string]uint64{
		"gpu_idle":                    nvml.ClocksEventReasonGpuIdle,
		"applications_clocks_setting": nvml.ClocksEventReasonApplicationsClocksSetting,
		"sw_power_cap":                nvml.ClocksEventReasonSwPowerCap,
		"hw_slowdown":                 nvml.ClocksThrottleReasonHwSlowdown,
		"sync_boost":                  nvml.ClocksEventReasonSyncBoost,
		"sw_thermal_slowdown":         nvml.ClocksEventReasonSwThermalSlowdown,
		"hw_thermal_slowdown":         nvml.ClocksThrottleReasonHwThermalSlowdown,
		"hw_power_brake_slowdown":     nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
		"display_clock_setting":       nvml.ClocksEventReasonDisplayClockSetting,
	}
	if len(schema.ClockEventReasons) != len(want) {
		t.Fatalf("catalogue has %d reasons, want %d", len(schema.ClockEventReasons), len(want))
	}
	for _, r := range schema.ClockEventReasons {
		if want[r.Name] != r.Bit {
			t.Errorf("%s: catalogue bit %#x, NVML %#x", r.Name, r.Bit, want[r.Name])
		}
	}
}
