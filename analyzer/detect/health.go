package detect

import (
	"math"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/gpumodel"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/schema"
)

// What slowed or ended a job, from each GPU's own series (see
// docs/health.md). Throttling is counted over busy time only: a GPU that
// idles at low clocks is not slowed. Faults are counted in every step a
// device reports, known or not: a GPU that falls off the bus leaves a
// partial step, and its last XID is in it.
//
// The thresholds are NVIDIA's semantics, not tunables: a throttling reason
// active for a fifth of a GPU's busy time is worth telling its owner.
const (
	// healthMinBusySteps: a GPU busy for fewer steps is not judged.
	healthMinBusySteps = 3
	// throttleMinShare: the share of busy time under a throttling reason
	// from which a GPU counts as throttled.
	throttleMinShare = 0.2
	// peerMaxShare: peers of a straggler throttled less than this.
	peerMaxShare = 0.05
	// stragglerClockRatio: a GPU whose mean busy SM clock is at most this
	// share of its peers' is a straggler even with no reason reported.
	stragglerClockRatio = 0.85
	// clockMinUtil: the mean util (percent) of a step whose SM clock
	// counts as the busy clock.
	clockMinUtil = 50
	// faultEndWindow: a job that ends within this long of a hardware fault
	// on one of its GPUs ended of that fault.
	faultEndWindow = 10 * time.Minute
)

// GPUHealth accumulates one GPU's throttling and faults over its
// allocation.
type GPUHealth struct {
	BusySteps int     `json:"busy_steps,omitempty"`
	BusyHours float64 `json:"busy_hours,omitempty"`
	// ThrottledHours are the busy hours under each of
	// features.ThrottleReasons; ThrottleFrom the signal they came from.
	ThrottledHours []float64 `json:"throttled_hours,omitempty"`
	ThrottleFrom   string    `json:"throttle_from,omitempty"`
	// ClockSteps busy steps had an SM clock; ClockSum is their sum (MHz).
	ClockSteps int     `json:"clock_steps,omitempty"`
	ClockSum   float64 `json:"clock_sum,omitempty"`
	// Levels are the error counters' last nonzero levels (see
	// features.Health); Based: they are the baseline.
	Levels map[string]float64 `json:"levels,omitempty"`
	Based  bool               `json:"based,omitempty"`
	// XIDs counts the XIDs raised during the allocation, by code.
	XIDs        map[int]int `json:"xids,omitempty"`
	DBE         float64     `json:"ecc_dbe,omitempty"`
	RemapUncorr float64     `json:"remap_uncorrectable,omitempty"`
	PCIeReplays float64     `json:"pcie_replays,omitempty"`
	RemapFailed bool        `json:"row_remap_failure,omitempty"`
	// FaultAt is the end of the last step with a hardware or driver fault
	// (FaultXID its XID, 0 for an ECC or row-remap fault); FirstFaultAt
	// the first.
	FaultAt      time.Time `json:"fault_at,omitempty"`
	FirstFaultAt time.Time `json:"first_fault_at,omitempty"`
	FaultXID     int       `json:"fault_xid,omitempty"`
	// AppXIDAt is the first step with an application XID.
	AppXIDAt time.Time `json:"app_xid_at,omitempty"`
	AppXID   int       `json:"app_xid,omitempty"`
}

// ThrottleShare is the largest share of busy time under one throttling
// reason, and that reason's index in features.ThrottleReasons.
func (h *GPUHealth) ThrottleShare() (float64, int) {
	best, at := 0.0, -1
	if h.BusyHours <= 0 {
		return 0, -1
	}
	for i, v := range h.ThrottledHours {
		if s := v / h.BusyHours; s > best {
			best, at = s, i
		}
	}
	return best, at
}

// Clock is the mean SM clock over busy steps (ok false without one).
func (h *GPUHealth) Clock() (float64, bool) {
	if h.ClockSteps == 0 {
		return 0, false
	}
	return h.ClockSum / float64(h.ClockSteps), true
}

// levelKeys name the counters whose rises are faults (xid levels are
// "xid:<code>").
const (
	levelXIDGauge  = "xid_last"
	levelDBE       = "ecc_dbe"
	levelRemap     = "remap_uncorrectable"
	levelPCIe      = schema.FieldPCIeReplay
	levelPowerViol = schema.FieldPowerViolation
	levelThermViol = schema.FieldThermalViolation
)

// observeHealth adds one step of a GPU's health signals. busy counts the
// step's throttling and clock (the step was known and the GPU active).
func (d *Detector) observeHealth(st *State, gs *GPUState, g features.GPU, end time.Time, step time.Duration, hours float64, busy bool) {
	h := &gs.Health
	in := &g.Health
	now := levels(g)
	setBaseline(st, h, g, now)
	if busy {
		observeBusy(h, g, now, step, hours)
	}
	xids := newXIDs(g, now, h.Levels)
	dbe, remap, pcie := rise(now, h.Levels, levelDBE), rise(now, h.Levels, levelRemap), rise(now, h.Levels, levelPCIe)
	h.Levels = now
	h.DBE += dbe
	h.RemapUncorr += remap
	h.PCIeReplays += pcie
	// An uncorrectable error is remapped to a spare row on GPUs with row
	// remapping (A100 on): the uncorrectable remapped rows' rise is the
	// double-bit error where the ECC counters are not exported, as in
	// dcgm-exporter's default counters.
	fault := dbe > 0 || remap > 0 || (in.RemapFailure && !h.RemapFailed)
	if in.RemapFailure {
		h.RemapFailed = true
	}
	if countXIDs(h, xids, end) {
		fault = true
	}
	if fault {
		if (dbe > 0 || remap > 0) && len(xids) == 0 {
			h.FaultXID = 0
		}
		h.FaultAt = end
		if h.FirstFaultAt.IsZero() {
			h.FirstFaultAt = end
		}
	}
}

// setBaseline gives h its counter levels the first step an allocation is
// seen in. Counter levels: a rise from the last level is an event. The
// baseline comes from the device's previous step where the detector read
// one, else from this step (a fault in that step is then missed). A level
// that drops is a reset (exporter or driver restart): a new baseline.
func setBaseline(st *State, h *GPUHealth, g features.GPU, now map[string]float64) {
	if h.Based {
		return
	}
	h.Based = true
	prev, ok := st.levels[features.DeviceID(g.Host, g.Device)]
	if !ok {
		prev = now
	}
	h.Levels = copyLevels(prev)
}

// rise is counter k's rise from its level in base to now; a drop (a reset)
// is no rise.
func rise(now, base map[string]float64, k string) float64 {
	if v, prev := now[k], base[k]; v > prev {
		return v - prev
	}
	return 0
}

// observeBusy adds a busy step's throttling and SM clock to h.
func observeBusy(h *GPUHealth, g features.GPU, now map[string]float64, step time.Duration, hours float64) {
	in := &g.Health
	h.BusySteps++
	h.BusyHours += hours
	if len(h.ThrottledHours) != len(features.ThrottleReasons) {
		h.ThrottledHours = make([]float64, len(features.ThrottleReasons))
	}
	throttle, from := in.Throttle, in.ThrottleFrom
	// The violation counters' rise over the step is its time under the
	// power or thermal cap, exactly; it replaces the bitmask's one
	// sample for those two reasons.
	for _, v := range []struct {
		key    string
		reason string
	}{{levelPowerViol, schema.ReasonSWPowerCap}, {levelThermViol, schema.ReasonSWThermalSlowdown}} {
		if _, ok := now[v.key]; !ok || step <= 0 {
			continue
		}
		throttle[reasonAt(v.reason)] = min(rise(now, h.Levels, v.key)/float64(step.Nanoseconds()), 1)
		from = features.FromViolation
	}
	if from != "" {
		h.ThrottleFrom = from
		for i, v := range throttle {
			h.ThrottledHours[i] += v * hours
		}
	}
	// The clock of a step busy half the time or less mixes idle
	// clocks in: only mostly busy steps tell the busy clock.
	if in.HasSMClock && (!g.HasUtil || g.UtilAvg >= clockMinUtil) {
		h.ClockSteps++
		h.ClockSum += in.SMClockMHz
	}
}

// newXIDs are the XIDs of the step, sorted, one per occurrence.
func newXIDs(g features.GPU, now, base map[string]float64) []int {
	var xids []int
	for code := range g.Health.XIDs {
		for range int(rise(now, base, xidKey(code))) {
			xids = append(xids, code)
		}
	}
	// DCGM's gauge holds the last XID: a change of it is one XID, unless
	// gpuwatch's counter already counted the step's.
	if v := now[levelXIDGauge]; v > 0 && v != base[levelXIDGauge] && len(xids) == 0 {
		xids = append(xids, int(v))
	}
	sort.Ints(xids)
	return xids
}

// countXIDs adds the step's XIDs to h, noting the first application XID,
// and reports whether one of them is a fault that is not the job's.
func countXIDs(h *GPUHealth, xids []int, end time.Time) (fault bool) {
	for _, code := range xids {
		if h.XIDs == nil {
			h.XIDs = map[int]int{}
		}
		h.XIDs[code]++
		x := health.XID(code)
		switch {
		case x.NotTheJobs():
			fault = true
			h.FaultXID = code
		case x.Owner == health.OwnerApplication && h.AppXIDAt.IsZero():
			h.AppXIDAt, h.AppXID = end, code
		}
	}
	return fault
}

// levels are a row's nonzero counter levels.
func levels(g features.GPU) map[string]float64 {
	in := &g.Health
	out := map[string]float64{}
	for k, v := range map[string]float64{levelXIDGauge: in.XIDLast, levelDBE: in.DBE, levelRemap: in.RemapUncorr, levelPCIe: in.PCIeReplays,
		levelPowerViol: in.PowerViolationNs, levelThermViol: in.ThermalViolationNs} {
		if v > 0 {
			out[k] = v
		}
	}
	for code, v := range in.XIDs {
		if v > 0 {
			out[xidKey(code)] = v
		}
	}
	return out
}

func copyLevels(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rememberLevels keeps every device's levels of this step, the baseline of
// an allocation that starts on it next.
func (st *State) rememberLevels(s features.Step) {
	if st.levels == nil {
		st.levels = map[string]map[string]float64{}
	}
	for _, g := range s.GPUs {
		if l := levels(g); len(l) > 0 {
			st.levels[features.DeviceID(g.Host, g.Device)] = l
		}
	}
}

func xidKey(code int) string { return "xid:" + itoa(code) }

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// gpuLoss is one GPU's estimated share of busy time lost to throttling:
// 1 − its mean busy SM clock over the reference clock (the model's maximum,
// or its peers' for a straggler). It assumes work that scales with the SM
// clock (compute-bound kernels): memory- or communication-bound work
// loses less, so it is an upper bound.
func gpuLoss(clock, ref float64) float64 {
	if ref <= 0 || clock <= 0 {
		return 0
	}
	return math.Max(0, 1-clock/ref)
}

// maxClock is the model's maximum SM clock (0 when unknown).
func maxClock(model string) float64 {
	m, _ := gpumodel.Lookup(model)
	return m.MaxSMClockMHz
}

// healthGPU is one judged GPU of an allocation.
type healthGPU struct {
	dev, uuid, model string
	share            float64
	reason           int
	clock            float64
	hasClock         bool
	busyHours        float64
}

// busyGPUs lists the allocation's GPUs busy long enough to judge, in
// device order.
func busyGPUs(a *Alloc) []healthGPU {
	var out []healthGPU
	for dev, g := range a.GPUs {
		if g.Health.BusySteps < healthMinBusySteps {
			continue
		}
		s, r := g.Health.ThrottleShare()
		c, ok := g.Health.Clock()
		out = append(out, healthGPU{dev: dev, uuid: g.UUID, model: g.Model, share: s, reason: r, clock: c, hasClock: ok, busyHours: g.Health.BusyHours})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dev < out[j].dev })
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// reasonAt is a reason's index in features.ThrottleReasons.
func reasonAt(name string) int {
	for i, r := range features.ThrottleReasons {
		if r == name {
			return i
		}
	}
	panic("detect: " + name + " is no throttling reason")
}

func reasonName(i int) string {
	if i < 0 || i >= len(features.ThrottleReasons) {
		return ""
	}
	return features.ThrottleReasons[i]
}
