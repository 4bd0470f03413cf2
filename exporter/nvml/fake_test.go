package nvml

import (
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fake drives a go-nvml mock server: it sets every function the source
// calls, answering from per-GPU values that a test can change, and records
// GPM samples and XID events. Tests override single functions afterwards.
type fake struct {
	srv    *server.Server
	gpus   []*fakeGPU
	events chan nvml.EventData

	mu      sync.Mutex
	samples []*fakeSample // every GPM sample allocated
}

type fakeGPU struct {
	dev   *server.Device
	index int

	util           nvml.Utilization
	enc, dec       uint32
	mem            nvml.Memory_v2
	temp, memTemp  uint32
	power, limit   uint32 // mW
	energy         uint64 // mJ
	smClk, memClk  uint32
	reasons        uint64
	powerViol      uint64 // ns
	thermViol      uint64
	ecc            [2][2]uint64 // [errorType][counterType]
	retiredSBE     []uint64
	retiredDBE     []uint64
	retiredPending bool
	remapCorr      int
	remapUnc       int
	remapPending   bool
	remapFailed    bool
	pcieReplay     int
	links          int
	nvlinkErr      [5]uint64 // per counter type, per link (value + link)
	nvlinkTX       uint64    // KiB per link
	nvlinkRX       uint64
	compute        []nvml.ProcessInfo
	graphics       []nvml.ProcessInfo
	// procUse answers GetProcessUtilization: the samples newer than the
	// caller's timestamp, NOT_FOUND when none is, useRet when set.
	procUse  []nvml.ProcessUtilizationSample
	useRet   nvml.Return
	useCalls []uint64 // the lastSeenTimestamp of every call

	gpm     bool
	gpmTick int // a test advances it between cycles; samples record it

	mig []*fakeMIG
}

// fakeMIG is a MIG device handle of one GPU instance.
type fakeMIG struct {
	handle *mock.Device
	giid   int
	mem    nvml.Memory
}

// fakeSample is a GPM sample buffer: Get records which device, instance and
// tick it sampled.
type fakeSample struct {
	mock.GpmSample
	filled bool
	gpu    int
	giid   int
	tick   int
	freed  bool
}

type fakeOptions struct {
	procs int  // compute processes per GPU
	links int  // NVLink links per GPU
	gpm   bool // GPM supported on every GPU
	// procUse makes GetProcessUtilization answer (one sample per process);
	// without it the call is NOT_SUPPORTED, as on drivers that lack it.
	procUse bool
}

func newFake(t testing.TB, srv *server.Server, o fakeOptions) *fake {
	t.Helper()
	f := &fake{srv: srv, events: make(chan nvml.EventData, 16)}
	for i, d := range srv.Devices {
		g := &fakeGPU{dev: d.(*server.Device), index: i, links: o.links, gpm: o.gpm}
		g.fill(o.procs)
		if !o.procUse {
			g.useRet = nvml.ERROR_NOT_SUPPORTED
		}
		f.gpus = append(f.gpus, g)
		f.wire(g)
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		set := &mock.EventSet{}
		set.WaitFunc = func(ms uint32) (nvml.EventData, nvml.Return) {
			select {
			case e := <-f.events:
				return e, nvml.SUCCESS
			case <-time.After(time.Duration(ms) * time.Millisecond):
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			}
		}
		set.FreeFunc = func() nvml.Return { return nvml.SUCCESS }
		return set, nvml.SUCCESS
	}
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		s := &fakeSample{}
		s.FreeFunc = func() nvml.Return { s.freed = true; return nvml.SUCCESS }
		f.mu.Lock()
		f.samples = append(f.samples, s)
		f.mu.Unlock()
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(q *nvml.GpmMetricsGetType) nvml.Return {
		s1, ok1 := q.Sample1.(*fakeSample)
		s2, ok2 := q.Sample2.(*fakeSample)
		if !ok1 || !ok2 || !s1.filled || !s2.filled || s1.gpu != s2.gpu || s1.giid != s2.giid || s1.tick >= s2.tick {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		for i := 0; i < int(q.NumMetrics); i++ {
			m := &q.Metrics[i]
			v, ret := gpmValue(s1.gpu, s1.giid, nvml.GpmMetricId(m.MetricId), s1.tick, s2.tick)
			m.Value, m.NvmlReturn = v, uint32(ret)
		}
		return nvml.SUCCESS
	}
	return f
}

// gpmValue is what the fake GPM computes from two samples: distinct per
// GPU, instance, metric and sample pair. NVLink is not measured per GPU
// instance, as on real MIG.
func gpmValue(gpu, giid int, id nvml.GpmMetricId, t1, t2 int) (float64, nvml.Return) {
	if giid >= 0 && (id == nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC || id == nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return float64(int(id)*3+gpu*5+(giid+1)*7+t1*11+t2) + 0.25, nvml.SUCCESS
}

// fill sets distinct values per GPU.
func (g *fakeGPU) fill(procs int) {
	i := uint32(g.index)
	g.util = nvml.Utilization{Gpu: 10 + i, Memory: 20 + i}
	g.enc, g.dec = 1+i, 2+i
	total := g.dev.MemoryInfo.Total
	g.mem = nvml.Memory_v2{Total: total, Reserved: 512*mib + 7, Used: uint64(1000+i)*mib + 123}
	g.mem.Free = total - g.mem.Used - g.mem.Reserved
	g.temp, g.memTemp = 40+i, 50+i
	g.power, g.limit = 250500+i*1000, 700000
	g.energy = 123456789 + uint64(i)
	g.smClk, g.memClk = 1980-i, 2619
	g.reasons = nvml.ClocksEventReasonSwPowerCap | nvml.ClocksThrottleReasonHwThermalSlowdown
	g.powerViol, g.thermViol = 1_000_000+uint64(i), 2_000_000+uint64(i)
	g.ecc = [2][2]uint64{{3 + uint64(i), 4}, {5, 6 + uint64(i)}}
	g.retiredSBE = []uint64{0x1000, 0x2000}
	g.retiredDBE = []uint64{0x3000}
	g.retiredPending = i%2 == 1
	g.remapCorr, g.remapUnc = 7+int(i), 1
	g.remapPending, g.remapFailed = false, i == 3
	g.pcieReplay = 9 + int(i)
	g.nvlinkErr = [5]uint64{11, 12, 13, 14, 15}
	g.nvlinkTX, g.nvlinkRX = 1000+uint64(i), 2000
	g.compute = nil
	for p := 0; p < procs; p++ {
		g.compute = append(g.compute, nvml.ProcessInfo{Pid: uint32(1000*(g.index+1) + p), UsedGpuMemory: uint64(p+1) * 256 * mib,
			GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF})
	}
	g.graphics = []nvml.ProcessInfo{}
	g.procUse = nil
	for k, p := range g.compute {
		g.procUse = append(g.procUse, nvml.ProcessUtilizationSample{Pid: p.Pid, TimeStamp: 1_000_000 + uint64(k),
			SmUtil: uint32(10 + k), MemUtil: uint32(5 + k), EncUtil: 1, DecUtil: 2})
	}
}

// wire sets every device function the source calls.
func (f *fake) wire(g *fakeGPU) {
	d := g.dev
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for k, c := range []byte(d.PciBusID) {
			p.BusId[k] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return g.mem, nvml.SUCCESS }
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return g.util, nvml.SUCCESS }
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return g.enc, 167000, nvml.SUCCESS }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return g.dec, 167000, nvml.SUCCESS }
	d.GetTemperatureFunc = func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
		if s != nvml.TEMPERATURE_GPU {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.temp, nvml.SUCCESS
	}
	d.GetFieldValuesFunc = func(vs []nvml.FieldValue) nvml.Return {
		for k := range vs {
			v := &vs[k]
			switch {
			case v.FieldId == nvml.FI_DEV_MEMORY_TEMP:
				v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				binary.LittleEndian.PutUint32(v.Value[:], g.memTemp)
			case v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX && int(v.ScopeId) < g.links:
				v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(v.Value[:], g.nvlinkTX+uint64(v.ScopeId))
			case v.FieldId == nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX && int(v.ScopeId) < g.links:
				v.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(v.Value[:], g.nvlinkRX+uint64(v.ScopeId))
			default:
				v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			}
		}
		return nvml.SUCCESS
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return g.power, nvml.SUCCESS }
	d.GetPowerManagementLimitFunc = func() (uint32, nvml.Return) { return g.limit, nvml.SUCCESS }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return g.energy, nvml.SUCCESS }
	d.GetClockInfoFunc = func(c nvml.ClockType) (uint32, nvml.Return) {
		switch c {
		case nvml.CLOCK_SM:
			return g.smClk, nvml.SUCCESS
		case nvml.CLOCK_MEM:
			return g.memClk, nvml.SUCCESS
		}
		return 0, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return g.reasons, nvml.SUCCESS }
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return g.reasons, nvml.SUCCESS }
	d.GetViolationStatusFunc = func(p nvml.PerfPolicyType) (nvml.ViolationTime, nvml.Return) {
		switch p {
		case nvml.PERF_POLICY_POWER:
			return nvml.ViolationTime{ReferenceTime: 1, ViolationTime: g.powerViol}, nvml.SUCCESS
		case nvml.PERF_POLICY_THERMAL:
			return nvml.ViolationTime{ReferenceTime: 1, ViolationTime: g.thermViol}, nvml.SUCCESS
		}
		return nvml.ViolationTime{}, nvml.ERROR_INVALID_ARGUMENT
	}
	d.GetTotalEccErrorsFunc = func(e nvml.MemoryErrorType, c nvml.EccCounterType) (uint64, nvml.Return) {
		return g.ecc[e][c], nvml.SUCCESS
	}
	d.GetRetiredPagesFunc = func(c nvml.PageRetirementCause) ([]uint64, nvml.Return) {
		if c == nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR {
			return g.retiredDBE, nvml.SUCCESS
		}
		return g.retiredSBE, nvml.SUCCESS
	}
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) {
		if g.retiredPending {
			return nvml.FEATURE_ENABLED, nvml.SUCCESS
		}
		return nvml.FEATURE_DISABLED, nvml.SUCCESS
	}
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) {
		return g.remapCorr, g.remapUnc, g.remapPending, g.remapFailed, nvml.SUCCESS
	}
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return g.pcieReplay, nvml.SUCCESS }
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if l >= g.links {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if l >= g.links {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return g.nvlinkErr[c] + uint64(l), nvml.SUCCESS
	}
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return g.compute, nvml.SUCCESS }
	d.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return g.graphics, nvml.SUCCESS }
	d.GetProcessUtilizationFunc = func(last uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		g.useCalls = append(g.useCalls, last)
		if g.useRet != nvml.SUCCESS {
			return nil, g.useRet
		}
		var out []nvml.ProcessUtilizationSample
		for _, u := range g.procUse {
			if u.TimeStamp > last {
				out = append(out, u)
			}
		}
		if len(out) == 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return out, nvml.SUCCESS
	}
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
	d.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
		if g.gpm {
			return nvml.GpmSupport{Version: 1, IsSupportedDevice: 1}, nvml.SUCCESS
		}
		return nvml.GpmSupport{Version: 1}, nvml.SUCCESS
	}
	d.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
		fs := s.(*fakeSample)
		fs.filled, fs.gpu, fs.giid, fs.tick = true, g.index, -1, g.gpmTick
		return nvml.SUCCESS
	}
	d.GpmMigSampleGetFunc = func(giid int, s nvml.GpmSample) nvml.Return {
		fs := s.(*fakeSample)
		fs.filled, fs.gpu, fs.giid, fs.tick = true, g.index, giid, g.gpmTick
		return nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d.GetMigDeviceHandleByIndexFunc = func(k int) (nvml.Device, nvml.Return) {
		if k < len(g.mig) {
			return g.mig[k].handle, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
}

// addMIG enables MIG on a GPU and creates one GPU instance per profile,
// each with a MIG device handle that answers memory queries.
func (f *fake) addMIG(t testing.TB, gpu int, profiles ...int) {
	t.Helper()
	g := f.gpus[gpu]
	if ret, _ := g.dev.SetMigMode(nvml.DEVICE_MIG_ENABLE); ret != nvml.SUCCESS {
		t.Fatalf("set MIG mode: %v", ret)
	}
	for _, p := range profiles {
		info, ret := g.dev.GetGpuInstanceProfileInfo(p)
		if ret != nvml.SUCCESS {
			t.Fatalf("profile %d: %v", p, ret)
		}
		gi, ret := g.dev.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			t.Fatalf("create GI: %v", ret)
		}
		gii, _ := gi.GetInfo()
		m := &fakeMIG{giid: int(gii.Id), handle: &mock.Device{}}
		m.mem = nvml.Memory{Total: info.MemorySizeMB * mib, Used: uint64(100+gii.Id) * mib, Free: info.MemorySizeMB*mib - uint64(100+gii.Id)*mib}
		m.handle.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return m.giid, nvml.SUCCESS }
		m.handle.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return m.mem, nvml.SUCCESS }
		g.mig = append(g.mig, m)
	}
}

// xid delivers an XID event for a GPU through the event set.
func (f *fake) xid(gpu int, xid uint64) {
	f.events <- nvml.EventData{Device: f.gpus[gpu].dev, EventType: nvml.EventTypeXidCriticalError, EventData: xid,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
}

func (f *fake) tick(n int) {
	for _, g := range f.gpus {
		g.gpmTick = n
	}
}

// series renders a snapshot as the collector does and indexes every series
// by name and full label set: `NAME{a="x",b="y"}` with labels sorted.
func series(snap *source.Snapshot) map[string]float64 {
	out := map[string]float64{}
	for _, mf := range collector.Render(snap) {
		for _, m := range mf.GetMetric() {
			out[seriesKey(mf.GetName(), m.GetLabel())] = value(m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

func seriesKey(name string, labels []*dto.LabelPair) string {
	ls := make([]string, 0, len(labels))
	for _, l := range labels {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return name + "{" + strings.Join(ls, ",") + "}"
}

// key is the series key of a metric of a GPU: DCGM names carry the full
// label set; gpuwatch_* series leave out the camelCase modelName (the
// collector drops it so promtool's lint stays clean on gpuwatch names).
func key(m *schema.Metric, g *fakeGPU, extra ...string) string {
	ls := gpuLabels(g, host, extra...)
	if !m.DCGM {
		keep := ls[:0]
		for _, l := range ls {
			if l.GetName() != schema.LabelModelName {
				keep = append(keep, l)
			}
		}
		ls = keep
	}
	return seriesKey(m.Name, ls)
}

// gpuLabels is the contract's label set of a GPU (and MIG instance), plus extra pairs.
func gpuLabels(g *fakeGPU, host string, extra ...string) []*dto.LabelPair {
	kv := []string{"gpu", fmt.Sprint(g.index), "UUID", g.dev.UUID, "pci_bus_id", g.dev.PciBusID,
		"device", fmt.Sprintf("nvidia%d", g.index), "modelName", g.dev.Config.Name, "hostname", host}
	kv = append(kv, extra...)
	var out []*dto.LabelPair
	for i := 0; i+1 < len(kv); i += 2 {
		n, v := kv[i], kv[i+1]
		out = append(out, &dto.LabelPair{Name: &n, Value: &v})
	}
	return out
}
