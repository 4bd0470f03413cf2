package sim

import (
	"errors"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// fieldMetrics maps the field names of a field_error fault (the NVML
// source's FieldError.Field names) to the metrics that field yields.
var fieldMetrics = map[string][]*schema.Metric{
	schema.FieldUtilization:       {schema.GPUUtil, schema.MemCopyUtil},
	schema.FieldMemory:            {schema.FBUsed, schema.FBFree, schema.FBReserved},
	schema.FieldTemperature:       {schema.GPUTemp},
	schema.FieldMemoryTemperature: {schema.MemoryTemp},
	schema.FieldPowerUsage:        {schema.PowerUsage},
	schema.FieldEnergy:            {schema.TotalEnergy},
	schema.FieldSMClock:           {schema.SMClock},
	schema.FieldECCDBEVolatile:    {schema.ECCDBEVol},
	schema.FieldPCIeReplay:        {schema.PCIeReplay},
}

// FieldNames lists the fields a field_error fault can fail.
func FieldNames() []string {
	out := make([]string, 0, len(fieldMetrics))
	for k := range fieldMetrics {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// errSimulatedUnknown is what a failing field reports: NVML's ERROR_UNKNOWN.
var errSimulatedUnknown = errors.New("unknown error (simulated ERROR_UNKNOWN)")

// Fault timing is analytic, like the noise: occurrences and windows are
// functions of the offset e since the origin, so counters built on them are
// monotonic and identical whatever the collection cadence.

// occurrences counts the fault's occurrences at or before e.
func (f *Fault) occurrences(e time.Duration) int64 {
	if e < f.At {
		return 0
	}
	if f.Every <= 0 {
		return 1
	}
	end := e
	if f.Until > 0 && end > f.Until {
		end = f.Until
	}
	return int64((end-f.At)/f.Every) + 1
}

// lastAt is the time of the latest occurrence at or before e (ok false if none).
func (f *Fault) lastAt(e time.Duration) (time.Duration, bool) {
	n := f.occurrences(e)
	if n == 0 {
		return 0, false
	}
	return f.At + time.Duration(n-1)*f.Every, true
}

// active reports whether a windowed fault is in effect at e.
func (f *Fault) active(e time.Duration) bool {
	last, ok := f.lastAt(e)
	if !ok {
		return false
	}
	return f.Duration == 0 || e-last < f.Duration
}

// activeTotal is the time the fault has been in effect up to e.
func (f *Fault) activeTotal(e time.Duration) time.Duration {
	n := f.occurrences(e)
	if n == 0 {
		return 0
	}
	last := f.At + time.Duration(n-1)*f.Every
	cur := e - last
	if f.Duration > 0 && cur > f.Duration {
		cur = f.Duration
	}
	if f.Every <= 0 {
		return cur
	}
	return time.Duration(n-1)*f.Duration + cur
}

// faultState is everything the faults of one device say at one instant.
type faultState struct {
	lost, thermal, power                 bool
	thermalNs, powerNs                   float64
	dbe, remapFailures                   int64
	remapPending, retiredPending         bool
	remapFailed                          bool
	pcieReplays                          int64
	nvFlit, nvData, nvReplay, nvRecovery int64
	xidLast                              int
	xidLastAt                            time.Duration
	xidCounts                            []int64  // parallel to simDevice.xids
	failing                              []string // field_error fields failing now
}

func (d *simDevice) faultState(e time.Duration) faultState {
	var s faultState
	s.xidLastAt = -1
	if len(d.xids) > 0 {
		s.xidCounts = make([]int64, len(d.xids))
	}
	for _, f := range d.faults {
		switch f.Kind {
		case GPULost:
			s.lost = s.lost || f.active(e)
		case FieldError:
			if f.active(e) && !contains(s.failing, f.Field) {
				s.failing = append(s.failing, f.Field)
			}
		case ThermalThrottle:
			s.thermal = s.thermal || f.active(e)
			s.thermalNs += float64(f.activeTotal(e))
		case PowerThrottle:
			s.power = s.power || f.active(e)
			s.powerNs += float64(f.activeTotal(e))
		case XID:
			n := f.occurrences(e)
			if n == 0 {
				continue
			}
			for i, c := range d.xids {
				if c == f.XID {
					s.xidCounts[i] += n * int64(f.Count)
				}
			}
			if at, _ := f.lastAt(e); at > s.xidLastAt {
				s.xidLastAt, s.xidLast = at, f.XID
			}
		case ECCDBE:
			n := f.occurrences(e) * int64(f.Count)
			s.dbe += n
			if n > 0 && f.active(e) {
				s.remapPending, s.retiredPending = true, true
			}
		case RowRemapFailure:
			n := f.occurrences(e)
			s.remapFailures += n * int64(f.Count)
			if n > 0 && f.active(e) {
				s.remapFailed = true
			}
		case PCIeReplay:
			s.pcieReplays += f.occurrences(e) * int64(f.Count)
		case NVLinkErrors:
			n := f.occurrences(e) * int64(f.Count)
			s.nvFlit += 3 * n
			s.nvData += n
			s.nvReplay += n
			s.nvRecovery += f.occurrences(e)
		}
	}
	return s
}
