package features

import (
	"strconv"
	"strings"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Health signals: two queries per fetch, whatever the fleet, read every
// signal of what slows or ends a job. Each is a union (`or`) of aggregates
// over several metrics, told apart by a label the expression adds
// (SignalLabel): a metric the data lacks adds nothing, so the same two
// queries serve dcgm-exporter's default counters and gpuwatch's own.
//
//   - fThrottle: DCGM_FI_DEV_CLOCKS_EVENT_REASONS' value at each step's
//     end (one sample a step: an estimate of each reason's share that
//     converges over a job's steps), the mean SM clock
//     (DCGM_FI_DEV_SM_CLOCK), and the power and thermal violation
//     counters' levels where they have risen, whose rise over a step is
//     its time under that cap, exactly;
//   - fFaults (only where nonzero): the XIDs, as the levels of
//     gpuwatch_xid_errors_total by code and the last XID of
//     DCGM_FI_DEV_XID_ERRORS (a change of it is an XID), and the levels of
//     the double-bit ECC, uncorrectable row-remap and PCIe replay counters
//     and the row-remap failure flag, the detector counting their rises.

// SignalLabel is the label the health queries add to tell their parts apart.
const SignalLabel = "gpuwatch_signal"

// The parts of the health queries.
const (
	sigPowerViol   = schema.FieldPowerViolation
	sigThermalViol = schema.FieldThermalViolation
	sigBitmask     = "bitmask"
	sigSMClock     = schema.FieldSMClock
	sigXID         = "xid"
	sigXIDLast     = "xid_last"
	sigDBE         = "ecc_dbe"
	sigRemapUncorr = "remap_uncorrectable"
	sigRemapFail   = "remap_failure"
	sigPCIe        = schema.FieldPCIeReplay
)

// ThrottleReasons are the clock-event reasons that slow a busy GPU: power
// cap, hardware slowdown, software and hardware thermal slowdown, power
// brake. Idle, application clocks, sync boost and display clocks lower
// clocks by design or by request and are no throttling.
var ThrottleReasons = []string{schema.ReasonSWPowerCap, schema.ReasonHWSlowdown, schema.ReasonSWThermalSlowdown,
	schema.ReasonHWThermalSlowdown, schema.ReasonHWPowerBrakeSlowdown}

// Where a GPU's throttle shares came from (Health.ThrottleFrom).
const (
	FromViolation = "violation_counters"
	FromBitmask   = "clocks_event_reasons_bitmask"
)

// Health is what a step says of one GPU's throttling and faults.
type Health struct {
	// Throttle is the share (0-1) of the step under each of
	// ThrottleReasons, in that order, from the bitmask; ThrottleFrom says
	// so, "" when the data has none (the detector adds the violation
	// counters' shares).
	Throttle     [5]float64
	ThrottleFrom string
	HasSMClock   bool
	SMClockMHz   float64
	// XIDs is gpuwatch_xid_errors_total's level by code; XIDLast is
	// DCGM_FI_DEV_XID_ERRORS' value at the step's end (0: none).
	XIDs    map[int]float64
	XIDLast float64
	// Levels of the uncorrectable ECC, uncorrectable row-remap and PCIe
	// replay counters (0: none or not exported); RemapFailure: row
	// remapping failed.
	DBE, RemapUncorr, PCIeReplays float64
	RemapFailure                  bool
	// PowerViolationNs and ThermalViolationNs are the violation
	// counters' levels (0: none or not exported); the detector turns
	// their rise into the share of sw_power_cap and sw_thermal_slowdown.
	PowerViolationNs, ThermalViolationNs float64
	// bits: the last bitmask value, decoded after the merge.
	bits    uint64
	hasBits bool
}

// ThrottleShare is the step's share under any throttling reason: the
// largest of the reasons' shares (their union is at least that).
func (h *Health) ThrottleShare() float64 {
	var m float64
	for _, v := range h.Throttle {
		m = max(m, v)
	}
	return m
}

func healthExprs(w string) (throttle, faults string) {
	tag := func(expr, sig string) string {
		return `label_replace(` + expr + `, "` + SignalLabel + `", "` + sig + `", "", "")`
	}
	// Every series a GPU costs the cycle a pass over its samples, so the
	// health queries read levels, not ranges, wherever they can: the
	// clock-event bitmask's value at each step's end (an instant selector;
	// 0 or 1, idle, holds no throttling reason and is not returned), the
	// power and thermal violation counters' levels (only where they have
	// risen at all), and one range, the mean SM clock.
	//
	// Counters are read as their level at each step's end, not their
	// increase: an increase inside non-overlapping windows misses the jump
	// between one step's last sample and the next one's first. The
	// detector compares each level with the step before. `> 0` keeps a
	// healthy GPU's zeros out of the answer, so the fault counters cost a
	// lookup, not a series in the result: gpuwatch's per-XID counter,
	// DCGM's last-XID gauge, the double-bit ECC and uncorrectable
	// row-remap counters, the row-remap failure flag (all three in
	// dcgm-exporter's default counters but the ECC one) and PCIe replays.
	level := func(m *schema.Metric) string { return m.Name + " > 0" }
	throttle = strings.Join([]string{
		tag(schema.ClockEvents.Name+" > 1", sigBitmask),
		tag(level(schema.PowerViolation), sigPowerViol),
		tag(level(schema.ThermViolation), sigThermalViol),
		tag("avg_over_time("+schema.SMClock.Name+w+")", sigSMClock),
	}, " or ")
	faults = strings.Join([]string{
		tag(level(schema.XIDErrors), sigXID),
		tag(level(schema.XIDLast), sigXIDLast),
		tag(level(schema.ECCDBEVol), sigDBE),
		tag(level(schema.RemapUncorr), sigRemapUncorr),
		tag(level(schema.RemapFailure), sigRemapFail),
		tag(level(schema.PCIeReplay), sigPCIe),
	}, " or ")
	return throttle, faults
}

// setHealth merges one sample of a health query into a holder's row.
func setHealth(g *GPU, f feature, m model.Metric, v float64) {
	h := &g.Health
	sig := lv(m, SignalLabel)
	switch f {
	case fThrottle:
		switch sig {
		case sigPowerViol:
			h.PowerViolationNs = max(h.PowerViolationNs, v)
		case sigThermalViol:
			h.ThermalViolationNs = max(h.ThermalViolationNs, v)
		case sigBitmask:
			h.bits, h.hasBits = uint64(v), true
		case sigSMClock:
			h.SMClockMHz, h.HasSMClock = max(h.SMClockMHz, v), true
		}
	case fFaults:
		switch sig {
		case sigXID:
			code, err := strconv.Atoi(lv(m, schema.LabelXID))
			if err != nil {
				return
			}
			if h.XIDs == nil {
				h.XIDs = map[int]float64{}
			}
			h.XIDs[code] = max(h.XIDs[code], v)
		case sigXIDLast:
			h.XIDLast = max(h.XIDLast, v)
		case sigDBE:
			h.DBE = max(h.DBE, v)
		case sigRemapUncorr:
			h.RemapUncorr = max(h.RemapUncorr, v)
		case sigRemapFail:
			h.RemapFailure = true
		case sigPCIe:
			h.PCIeReplays = max(h.PCIeReplays, v)
		}
	}
}

// finishHealth decodes the bitmask where no better signal was found.
func finishHealth(h *Health) {
	if h.ThrottleFrom != "" || !h.hasBits {
		return
	}
	for i, name := range ThrottleReasons {
		for _, r := range schema.ClockEventReasons {
			if r.Name == name && h.bits&r.Bit != 0 {
				h.Throttle[i] = 1
			}
		}
	}
	h.ThrottleFrom = FromBitmask
}
