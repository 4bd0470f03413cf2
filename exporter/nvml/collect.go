package nvml

import (
	"encoding/binary"
	"math"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

const mib = 1 << 20

// clockReason is one bit of the clock event reasons bitmask.
type clockReason struct {
	bit    uint64
	labels []string // the reason label value, shared by every sample
}

// newClockReasons builds the per-reason label values once, from the
// catalogue (TestClockEventBitsMatchNVML checks the bits against go-nvml).
func newClockReasons() []clockReason {
	out := make([]clockReason, len(schema.ClockEventReasons))
	for i, r := range schema.ClockEventReasons {
		out[i] = clockReason{bit: r.Bit, labels: []string{r.Name}}
	}
	return out
}

// collectDevice appends the device (and its MIG instances) and its
// processes to snap.
func (s *Source) collectDevice(d *device, snap *source.Snapshot) {
	if !d.identified && d.h != nil {
		// Identity failed at start: try again, and finish the enumeration
		// that needed it.
		s.identify(d)
		if d.identified {
			s.enumerateLinks(d)
			s.enumerateMIG(d)
			if s.gpm != nil {
				s.gpm.setup(d)
			}
			if s.xid != nil {
				s.xid.register(d)
			}
		}
	}
	out := source.Device{Index: d.index, UUID: d.uuid, PCIBusID: d.busID, Model: d.model, Capabilities: d.caps}
	if !d.identified {
		snap.Devices = append(snap.Devices, out)
		return
	}
	r := reader{log: s.log, snap: snap, key: d.key, unsupported: &d.unsupported,
		samples: make([]source.Sample, 0, d.nsamples)}
	out.Up = s.readMemory(d, &r)
	if out.Up {
		s.readFields(d, &r)
		first := len(snap.Processes)
		complete := s.readProcesses(d, &r)
		if s.readProcessUse(d, &r, snap.Processes[first:], complete) && !r.lost {
			out.ProcessUse = true
			out.Capabilities = s.capsWithUse(out.Capabilities)
		}
		if s.xid != nil {
			s.xid.samples(d.index, &r)
		}
		if s.gpm != nil && d.gpm != nil && !r.lost {
			s.gpm.collect(&r, d.gpm, d.h, -1)
		}
		out.Up = !r.lost
	}
	if !out.Up {
		r.samples = r.samples[:0]
		out.ProcessUse = false
		out.Capabilities = d.caps
		if len(r.snap.Processes) > 0 {
			// Drop the processes read before the GPU was found lost.
			keep := r.snap.Processes[:0]
			for _, p := range r.snap.Processes {
				if p.DeviceKey != d.key && !d.ownsKey(p.DeviceKey) {
					keep = append(keep, p)
				}
			}
			r.snap.Processes = keep
		}
	}
	out.Samples = r.samples
	if len(r.samples) > d.nsamples {
		d.nsamples = len(r.samples)
	}
	snap.Devices = append(snap.Devices, out)
	for _, gi := range d.mig {
		s.collectMIG(d, gi, out.Up, snap)
	}
}

func (d *device) ownsKey(key string) bool {
	for _, gi := range d.mig {
		if gi.key == key {
			return true
		}
	}
	return false
}

// readMemory reads the framebuffer, the one must-have call: a GPU that
// cannot say its memory is reported down.
func (s *Source) readMemory(d *device, r *reader) bool {
	if !r.skip(fMemoryV2) {
		m, ret := d.h.GetMemoryInfo_v2()
		if r.ok(fMemoryV2, ret) {
			r.add(schema.FBUsed, float64(m.Used/mib))
			r.add(schema.FBFree, float64(m.Free/mib))
			r.add(schema.FBReserved, float64(m.Reserved/mib))
			return true
		}
		if r.lost {
			return false
		}
		if *r.unsupported&(1<<fMemoryV2) == 0 {
			return false // a real failure, already filed
		}
	}
	m, ret := d.h.GetMemoryInfo()
	if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_FUNCTION_NOT_FOUND {
		r.fail(fMemory, ret)
		return false
	}
	if !r.ok(fMemory, ret) {
		return false
	}
	r.add(schema.FBUsed, float64(m.Used/mib))
	r.add(schema.FBFree, float64(m.Free/mib))
	return true
}

// readFields reads every other per-GPU field of the metric contract: the
// plain calls of reads, then those that need more than one call or decoding.
func (s *Source) readFields(d *device, r *reader) {
	d.readPlain(r)
	s.readFieldValues(d, r)
	s.readClockEvents(d, r)
	s.readNVLink(d, r)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// readClockEvents publishes the bitmask and one 0/1 series per reason.
// Drivers before 535 only have the older "throttle reasons" call.
func (s *Source) readClockEvents(d *device, r *reader) {
	var mask uint64
	var ret gonvml.Return
	switch {
	case !r.skip(fClockEvents):
		mask, ret = d.h.GetCurrentClocksEventReasons()
		if !r.ok(fClockEvents, ret) {
			if r.skip(fClockEvents) && !r.lost {
				s.readClockEvents(d, r) // unsupported: fall back at once
			}
			return
		}
	case !r.skip(fClockEventsLegacy):
		mask, ret = d.h.GetCurrentClocksThrottleReasons()
		if !r.ok(fClockEventsLegacy, ret) {
			return
		}
	default:
		return
	}
	r.add(schema.ClockEvents, float64(mask))
	for _, cr := range s.reasons {
		r.addLabelled(schema.ClockEventActive, cr.labels, boolValue(mask&cr.bit != 0))
	}
}

// readFieldValues reads, in one call, the values NVML only offers as field
// values: memory temperature and the per-link NVLink data throughput.
func (s *Source) readFieldValues(d *device, r *reader) {
	if r.skip(fFieldValues) || (r.skip(fMemoryTemp) && r.skip(fNVLinkBandwidth)) || len(d.fv) == 0 {
		return
	}
	for i := range d.fv {
		d.fv[i].NvmlReturn = 0
		d.fv[i].Value = [8]byte{}
	}
	if !r.ok(fFieldValues, d.h.GetFieldValues(d.fv)) {
		return
	}
	if !r.skip(fMemoryTemp) {
		if v, ok := fieldValue(r, fMemoryTemp, &d.fv[0]); ok {
			r.add(schema.MemoryTemp, v)
		}
	}
	if len(d.links) > 0 && !r.skip(fNVLinkBandwidth) {
		var sum float64
		for i := 1; i < len(d.fv); i++ {
			v, ok := fieldValue(r, fNVLinkBandwidth, &d.fv[i])
			if !ok {
				return
			}
			sum += v
		}
		r.add(schema.NVLinkBW, sum)
	}
}

// fieldValue decodes one NVML field value (a C union, little-endian here).
func fieldValue(r *reader, f field, v *gonvml.FieldValue) (float64, bool) {
	if !r.ok(f, gonvml.Return(v.NvmlReturn)) {
		return 0, false
	}
	switch gonvml.ValueType(v.ValueType) {
	case gonvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(v.Value[:])), true
	case gonvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(v.Value[:])), true
	case gonvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(v.Value[:]))), true
	case gonvml.VALUE_TYPE_UNSIGNED_LONG, gonvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(v.Value[:])), true
	case gonvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(v.Value[:]))), true
	case gonvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(v.Value[:])), true
	}
	r.fail(f, gonvml.ERROR_UNKNOWN)
	return 0, false
}

// enumerateLinks finds the NVLink links that are up, once, and prepares the
// field-value request that reads them.
func (s *Source) enumerateLinks(d *device) {
	d.links = d.links[:0]
	for l := 0; l < gonvml.NVLINK_MAX_LINKS; l++ {
		st, ret := d.h.GetNvLinkState(l)
		if ret == gonvml.ERROR_NOT_SUPPORTED || ret == gonvml.ERROR_INVALID_ARGUMENT || ret == gonvml.ERROR_FUNCTION_NOT_FOUND {
			break // no (more) links on this device
		}
		if ret == gonvml.SUCCESS && st == gonvml.FEATURE_ENABLED {
			d.links = append(d.links, l)
		}
	}
	d.fv = make([]gonvml.FieldValue, 1, 1+2*len(d.links))
	d.fv[0] = gonvml.FieldValue{FieldId: gonvml.FI_DEV_MEMORY_TEMP}
	for _, l := range d.links {
		d.fv = append(d.fv,
			gonvml.FieldValue{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: uint32(l)},
			gonvml.FieldValue{FieldId: gonvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ScopeId: uint32(l)})
	}
	if len(d.links) == 0 {
		d.unsupported |= 1<<fNVLinkCRCFlit | 1<<fNVLinkCRCData | 1<<fNVLinkReplay | 1<<fNVLinkRecovery | 1<<fNVLinkBandwidth
	}
}

var nvlinkCounters = []struct {
	f       field
	counter gonvml.NvLinkErrorCounter
	m       *schema.Metric
}{
	{fNVLinkCRCFlit, gonvml.NVLINK_ERROR_DL_CRC_FLIT, schema.NVLinkCRCFlit},
	{fNVLinkCRCData, gonvml.NVLINK_ERROR_DL_CRC_DATA, schema.NVLinkCRCData},
	{fNVLinkReplay, gonvml.NVLINK_ERROR_DL_REPLAY, schema.NVLinkReplay},
	{fNVLinkRecovery, gonvml.NVLINK_ERROR_DL_RECOVERY, schema.NVLinkRecovery},
}

// readNVLink sums each error counter over the device's links (the _TOTAL
// names of DCGM).
func (s *Source) readNVLink(d *device, r *reader) {
counters:
	for _, c := range nvlinkCounters {
		if r.skip(c.f) {
			continue
		}
		var sum uint64
		for _, l := range d.links {
			n, ret := d.h.GetNvLinkErrorCounter(l, c.counter)
			if !r.ok(c.f, ret) {
				continue counters
			}
			sum += n
		}
		r.add(c.m, float64(sum))
	}
}

// readProcesses lists compute and graphics processes. On a MIG GPU a
// process belongs to the GPU instance it runs in. It reports whether the
// list is complete: compute processes listed, graphics processes listed or
// not supported by the device.
func (s *Source) readProcesses(d *device, r *reader) bool {
	complete := false
	if !r.skip(fComputeProcs) {
		ps, ret := d.h.GetComputeRunningProcesses()
		if r.ok(fComputeProcs, ret) {
			s.addProcesses(d, r, ps, source.Compute)
			complete = true
		}
	}
	if !r.skip(fGraphicsProcs) {
		ps, ret := d.h.GetGraphicsRunningProcesses()
		if r.ok(fGraphicsProcs, ret) {
			s.addProcesses(d, r, ps, source.Graphics)
		} else if !r.skip(fGraphicsProcs) {
			complete = false // a real failure, not an unsupported call
		}
	}
	return complete
}

func (s *Source) addProcesses(d *device, r *reader, ps []gonvml.ProcessInfo, typ source.ProcessType) {
	for _, p := range ps {
		key := d.key
		for _, gi := range d.mig {
			if uint32(gi.giid) == p.GpuInstanceId {
				key = gi.key
				break
			}
		}
		mem := p.UsedGpuMemory
		if mem == math.MaxUint64 { // NVML_VALUE_NOT_AVAILABLE (no permission, Windows WDDM)
			mem = 0
		}
		r.snap.Processes = append(r.snap.Processes, source.Process{DeviceKey: key, PID: int(p.Pid), Type: typ, MemoryBytes: mem})
	}
}
