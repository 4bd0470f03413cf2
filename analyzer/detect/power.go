package detect

import (
	"math"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/gpumodel"
)

// PowerBook learns each GPU's power range from its own history: the lowest
// step-mean draw seen while the GPU was idle (its baseline) and the highest
// draw seen at all. dcgm-exporter's default counters publish power usage
// but no power limit, and idle draw differs between boards of one model
// (cooling, firmware, persistence mode), so a per-GPU baseline judges
// "near idle" better than any fixed fraction. Until a GPU has been seen
// idle, the model table's figures stand in.
type PowerBook map[string]*PowerRange

// PowerRange is what one GPU's history says about its draw.
type PowerRange struct {
	IdleW float64 `json:"idle_w"` // 0 until seen idle
	PeakW float64 `json:"peak_w"`
	// LimitW is the last power limit the data carried, if any.
	LimitW float64 `json:"limit_w,omitempty"`
}

func powerKey(g features.GPU) string { return g.Host + "|" + g.UUID }

// observe records one step of one GPU; idle says the step had no activity.
func (b PowerBook) observe(g features.GPU, idle bool) {
	if !g.HasPowerW || g.PowerW <= 0 || g.Device != g.UUID {
		return // MIG instances share the board's power: learn on the GPU
	}
	r := b[powerKey(g)]
	if r == nil {
		r = &PowerRange{}
		b[powerKey(g)] = r
	}
	if idle && (r.IdleW == 0 || g.PowerW < r.IdleW) {
		r.IdleW = g.PowerW
	}
	r.PeakW = math.Max(r.PeakW, g.PowerW)
	if g.HasLimit && g.PowerLimitW > 0 {
		r.LimitW = g.PowerLimitW
	}
}

// rangeOf returns a GPU's idle draw and the most it may draw: the learnt
// baseline else the model's idle figure; the power limit in the data, else
// the model's TDP.
func (b PowerBook) rangeOf(g features.GPU) (idle, limit float64, ok bool) {
	m, known := gpumodel.Lookup(g.Model)
	idle, limit = math.NaN(), math.NaN()
	if r := b[powerKey(g)]; r != nil && r.IdleW > 0 {
		idle = r.IdleW
	} else if known {
		idle = m.IdleWatts
	}
	switch {
	case g.HasLimit && g.PowerLimitW > 0:
		limit = g.PowerLimitW
	case known:
		limit = m.TDPWatts
	}
	if math.IsNaN(idle) || math.IsNaN(limit) || limit <= idle {
		return 0, 0, false
	}
	return idle, limit, true
}

// aboveIdle is where a GPU's mean draw in a step sits between its idle
// baseline (0) and its limit (1).
func (b PowerBook) aboveIdle(g features.GPU) (float64, bool) {
	if !g.HasPowerW || g.Device != g.UUID {
		return 0, false
	}
	idle, limit, ok := b.rangeOf(g)
	if !ok {
		return 0, false
	}
	return math.Max(0, g.PowerW-idle) / (limit - idle), true
}

// ratio is a GPU's mean draw as a fraction of its limit, from the data's
// limit or the model's TDP.
func (b PowerBook) ratio(g features.GPU) (float64, bool) {
	if !g.HasPowerW || g.Device != g.UUID {
		return 0, false
	}
	if g.HasLimit && g.PowerLimitW > 0 {
		return g.PowerW / g.PowerLimitW, true
	}
	if m, ok := gpumodel.Lookup(g.Model); ok && m.TDPWatts > 0 {
		return g.PowerW / m.TDPWatts, true
	}
	return 0, false
}
