package nvml

import (
	"math"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/schema"
)

// gpmMetric maps one GPM metric onto its DCGM profiling name. GPM reports
// utilisations in percent (DCGM: ratio 0-1) and throughput in MiB/s (DCGM:
// bytes/s); scale converts.
type gpmMetric struct {
	id    gonvml.GpmMetricId
	m     *schema.Metric
	scale float64
}

var gpmMetrics = [...]gpmMetric{
	{gonvml.GPM_METRIC_GRAPHICS_UTIL, schema.ProfGrEngineActive, 0.01},
	{gonvml.GPM_METRIC_SM_UTIL, schema.ProfSMActive, 0.01},
	{gonvml.GPM_METRIC_SM_OCCUPANCY, schema.ProfSMOccupancy, 0.01},
	{gonvml.GPM_METRIC_ANY_TENSOR_UTIL, schema.ProfTensorActive, 0.01},
	{gonvml.GPM_METRIC_DRAM_BW_UTIL, schema.ProfDRAMActive, 0.01},
	{gonvml.GPM_METRIC_FP64_UTIL, schema.ProfFP64Active, 0.01},
	{gonvml.GPM_METRIC_FP32_UTIL, schema.ProfFP32Active, 0.01},
	{gonvml.GPM_METRIC_FP16_UTIL, schema.ProfFP16Active, 0.01},
	{gonvml.GPM_METRIC_PCIE_TX_PER_SEC, schema.ProfPCIeTX, mib},
	{gonvml.GPM_METRIC_PCIE_RX_PER_SEC, schema.ProfPCIeRX, mib},
	{gonvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, schema.ProfNVLinkTX, mib},
	{gonvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, schema.ProfNVLinkRX, mib},
}

// gpmSampler holds the two GPM sample buffers of one GPU or GPU instance.
// They are allocated once and alternate: each cycle fills one and computes
// against the other, so a cycle allocates nothing.
type gpmSampler struct {
	samples [2]gonvml.GpmSample
	cur     int  // the buffer the next cycle fills
	have    bool // samples[1-cur] holds the previous cycle's sample
	// unsupported marks metrics (bit = index in gpmMetrics) this device
	// does not report, such as NVLink on a PCIe card or on a GPU instance.
	unsupported uint32
}

// gpmState is the GPM side of a Source.
type gpmState struct {
	s *Source
	// req is reused by every GpmMetricsGet call: it holds 477 metric slots.
	req     gonvml.GpmMetricsGetType
	idx     [len(gpmMetrics)]int // req.Metrics[i] comes from gpmMetrics[idx[i]]
	handles []gonvml.GpmSample
}

func newGPMState(s *Source) *gpmState {
	g := &gpmState{s: s}
	for _, d := range s.devs {
		if d.identified {
			g.setup(d)
		}
	}
	return g
}

// setup checks GPM support and allocates the sample buffers of a device and
// of each of its GPU instances.
func (g *gpmState) setup(d *device) {
	sup, ret := d.h.GpmQueryDeviceSupport()
	if ret != gonvml.SUCCESS || sup.IsSupportedDevice == 0 {
		why := "not supported by the device"
		if ret != gonvml.SUCCESS {
			why = ret.Error()
		}
		g.s.log.Info("GPM unavailable; no DCGM_FI_PROF_* series for this device", "device", d.key, "reason", why)
		return
	}
	if d.gpm = g.alloc(d.key); d.gpm != nil {
		d.caps = g.s.capsGPM
	}
	for _, gi := range d.mig {
		if gi.gpm = g.alloc(gi.key); gi.gpm != nil {
			gi.caps = g.s.capsGPM
		}
	}
}

func (g *gpmState) alloc(key string) *gpmSampler {
	sm := &gpmSampler{}
	for i := range sm.samples {
		h, ret := g.s.lib.GpmSampleAlloc()
		if ret != gonvml.SUCCESS {
			g.s.log.Warn("cannot allocate GPM sample; no profiling metrics", "device", key, "err", ret.Error())
			for j := 0; j < i; j++ {
				_ = sm.samples[j].Free()
			}
			return nil
		}
		sm.samples[i] = h
		g.handles = append(g.handles, h)
	}
	return sm
}

// collect takes this cycle's sample and, from the second cycle on, appends
// the metrics computed over the previous and the current sample. giid < 0
// samples the whole GPU, else the GPU instance.
func (g *gpmState) collect(r *reader, sm *gpmSampler, h gonvml.Device, giid int) {
	if r.skip(fGPM) {
		return
	}
	cur := sm.samples[sm.cur]
	var ret gonvml.Return
	if giid < 0 {
		ret = h.GpmSampleGet(cur)
	} else {
		ret = h.GpmMigSampleGet(giid, cur)
	}
	if !r.ok(fGPM, ret) {
		// The previous sample stays: the next good one is measured against it.
		return
	}
	prev := sm.samples[1-sm.cur]
	had := sm.have
	sm.have = true
	sm.cur = 1 - sm.cur
	if !had {
		return // one sample gives no rate
	}
	q := &g.req
	q.Sample1, q.Sample2 = prev, cur
	n := 0
	for i := range gpmMetrics {
		if sm.unsupported&(1<<i) != 0 {
			continue
		}
		q.Metrics[n] = gonvml.GpmMetric{MetricId: uint32(gpmMetrics[i].id)}
		g.idx[n] = i
		n++
	}
	q.NumMetrics = uint32(n)
	if !r.ok(fGPM, g.s.lib.GpmMetricsGet(q)) {
		return
	}
	for k := 0; k < n && k < int(q.NumMetrics); k++ {
		i := g.idx[k]
		res := &q.Metrics[k]
		switch ret := gonvml.Return(res.NvmlReturn); ret {
		case gonvml.SUCCESS:
			if math.IsNaN(res.Value) || math.IsInf(res.Value, 0) {
				continue
			}
			r.add(gpmMetrics[i].m, res.Value*gpmMetrics[i].scale)
		case gonvml.ERROR_NOT_SUPPORTED:
			sm.unsupported |= 1 << i
			r.log.Info("GPM metric not supported; not published", "device", r.key, "metric", gpmMetrics[i].m.Name)
		default:
			r.fail(fGPM, ret)
		}
	}
}

// free releases every sample buffer.
func (g *gpmState) free() {
	for _, h := range g.handles {
		_ = h.Free()
	}
	g.handles = nil
}
