package nvml

import (
	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/schema"
)

// read is one NVML call that yields fixed metrics of a device: f is the
// field its failures are filed under, get makes the call and writes one
// value per metric into v (len(v) == len(metrics)). The table below is the
// whole of the plain per-GPU reads; doc.go's table of calls is generated
// from it (TestDocTable).
type read struct {
	f       field
	call    string // the NVML call, as the docs name it
	metrics []*schema.Metric
	note    string // unit and conversion, for the docs
	get     func(h gonvml.Device, v []float64) gonvml.Return
}

// maxReadValues bounds len(read.metrics): the scratch space of a device.
const maxReadValues = 4

var reads = []read{
	{fUtilization, "GetUtilizationRates", metrics(schema.GPUUtil, schema.MemCopyUtil), "%",
		func(h gonvml.Device, v []float64) gonvml.Return {
			u, ret := h.GetUtilizationRates()
			v[0], v[1] = float64(u.Gpu), float64(u.Memory)
			return ret
		}},
	{fEncoder, "GetEncoderUtilization", metrics(schema.EncUtil), "%",
		func(h gonvml.Device, v []float64) gonvml.Return {
			u, _, ret := h.GetEncoderUtilization()
			v[0] = float64(u)
			return ret
		}},
	{fDecoder, "GetDecoderUtilization", metrics(schema.DecUtil), "%",
		func(h gonvml.Device, v []float64) gonvml.Return {
			u, _, ret := h.GetDecoderUtilization()
			v[0] = float64(u)
			return ret
		}},
	{fTemperature, "GetTemperature(TEMPERATURE_GPU)", metrics(schema.GPUTemp), "C",
		func(h gonvml.Device, v []float64) gonvml.Return {
			t, ret := h.GetTemperature(gonvml.TEMPERATURE_GPU)
			v[0] = float64(t)
			return ret
		}},
	{fPowerUsage, "GetPowerUsage", metrics(schema.PowerUsage), "mW / 1000, W",
		func(h gonvml.Device, v []float64) gonvml.Return {
			p, ret := h.GetPowerUsage()
			v[0] = float64(p) / 1000
			return ret
		}},
	{fPowerLimit, "GetPowerManagementLimit", metrics(schema.PowerLimit), "mW / 1000, W",
		func(h gonvml.Device, v []float64) gonvml.Return {
			p, ret := h.GetPowerManagementLimit()
			v[0] = float64(p) / 1000
			return ret
		}},
	{fEnergy, "GetTotalEnergyConsumption", metrics(schema.TotalEnergy), "mJ, counter",
		func(h gonvml.Device, v []float64) gonvml.Return {
			e, ret := h.GetTotalEnergyConsumption()
			v[0] = float64(e)
			return ret
		}},
	{fSMClock, "GetClockInfo(CLOCK_SM)", metrics(schema.SMClock), "MHz",
		func(h gonvml.Device, v []float64) gonvml.Return {
			c, ret := h.GetClockInfo(gonvml.CLOCK_SM)
			v[0] = float64(c)
			return ret
		}},
	{fMemClock, "GetClockInfo(CLOCK_MEM)", metrics(schema.MemClock), "MHz",
		func(h gonvml.Device, v []float64) gonvml.Return {
			c, ret := h.GetClockInfo(gonvml.CLOCK_MEM)
			v[0] = float64(c)
			return ret
		}},
	violation(fPowerViolation, "PERF_POLICY_POWER", gonvml.PERF_POLICY_POWER, schema.PowerViolation),
	violation(fThermalViolation, "PERF_POLICY_THERMAL", gonvml.PERF_POLICY_THERMAL, schema.ThermViolation),
	ecc(fECCSBEVol, "CORRECTED, VOLATILE_ECC", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.VOLATILE_ECC, schema.ECCSBEVol),
	ecc(fECCDBEVol, "UNCORRECTED, VOLATILE_ECC", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.VOLATILE_ECC, schema.ECCDBEVol),
	ecc(fECCSBEAgg, "CORRECTED, AGGREGATE_ECC", gonvml.MEMORY_ERROR_TYPE_CORRECTED, gonvml.AGGREGATE_ECC, schema.ECCSBEAgg),
	ecc(fECCDBEAgg, "UNCORRECTED, AGGREGATE_ECC", gonvml.MEMORY_ERROR_TYPE_UNCORRECTED, gonvml.AGGREGATE_ECC, schema.ECCDBEAgg),
	retired(fRetiredSBE, "MULTIPLE_SINGLE_BIT_ECC_ERRORS", gonvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, schema.RetiredSBE),
	retired(fRetiredDBE, "DOUBLE_BIT_ECC_ERROR", gonvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, schema.RetiredDBE),
	{fRetiredPending, "GetRetiredPagesPendingStatus", metrics(schema.RetiredPending), "0/1",
		func(h gonvml.Device, v []float64) gonvml.Return {
			st, ret := h.GetRetiredPagesPendingStatus()
			v[0] = boolValue(st == gonvml.FEATURE_ENABLED)
			return ret
		}},
	{fRemappedRows, "GetRemappedRows", metrics(schema.RemapCorr, schema.RemapUncorr, schema.RemapPending, schema.RemapFailure),
		"rows; pending and failure 0/1",
		func(h gonvml.Device, v []float64) gonvml.Return {
			corr, unc, pending, failed, ret := h.GetRemappedRows()
			v[0], v[1], v[2], v[3] = float64(corr), float64(unc), boolValue(pending), boolValue(failed)
			return ret
		}},
	{fPCIeReplay, "GetPcieReplayCounter", metrics(schema.PCIeReplay), "counter",
		func(h gonvml.Device, v []float64) gonvml.Return {
			n, ret := h.GetPcieReplayCounter()
			v[0] = float64(n)
			return ret
		}},
}

func metrics(ms ...*schema.Metric) []*schema.Metric { return ms }

func violation(f field, name string, policy gonvml.PerfPolicyType, m *schema.Metric) read {
	return read{f, "GetViolationStatus(" + name + ")", metrics(m), "ns, counter",
		func(h gonvml.Device, v []float64) gonvml.Return {
			s, ret := h.GetViolationStatus(policy)
			v[0] = float64(s.ViolationTime)
			return ret
		}}
}

func ecc(f field, name string, typ gonvml.MemoryErrorType, counter gonvml.EccCounterType, m *schema.Metric) read {
	return read{f, "GetTotalEccErrors(" + name + ")", metrics(m), "errors",
		func(h gonvml.Device, v []float64) gonvml.Return {
			n, ret := h.GetTotalEccErrors(typ, counter)
			v[0] = float64(n)
			return ret
		}}
}

func retired(f field, name string, cause gonvml.PageRetirementCause, m *schema.Metric) read {
	return read{f, "GetRetiredPages(" + name + ")", metrics(m), "number of pages",
		func(h gonvml.Device, v []float64) gonvml.Return {
			p, ret := h.GetRetiredPages(cause)
			v[0] = float64(len(p))
			return ret
		}}
}

// readPlain makes every call of reads that the device supports.
func (d *device) readPlain(r *reader) {
	for i := range reads {
		rd := &reads[i]
		if r.skip(rd.f) {
			continue
		}
		v := d.scratch[:len(rd.metrics)]
		if r.ok(rd.f, rd.get(d.h, v)) {
			for j, m := range rd.metrics {
				r.add(m, v[j])
			}
		}
	}
}
