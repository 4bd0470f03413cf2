package detect

import (
	"math"
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/gpumodel"
)

// FloorBook learns each GPU model's idle floor of power from the fleet's
// own data: what the model's whole GPUs draw in steps where they hold a
// context and do nothing with it (idleWithContext). What a board draws while it holds CUDA contexts and runs nothing is
// model-specific and can be half its TDP (an L4 at about 35 W of 72 W), so
// no one share of the power limit tells idle from work on every part; and
// learning a baseline only from steps already judged idle is circular for
// exactly those parts, whose idle steps a share-of-TDP veto never lets
// through. A step counts here by its raw activity alone, never by a
// judgement that used power. Until a model has FloorMinSamples such
// steps, the model table's figure stands in (gpumodel.IdleFloorWatts).
//
// MIG instances share their board's power and have no power of their own:
// they are not learnt from and power judges none of them (aboveFloor).
type FloorBook map[string]*ModelFloor

// ModelFloor is what the fleet's idle steps say of one model's draw.
type ModelFloor struct {
	// Watts counts the idle steps by their mean draw, rounded to the watt:
	// a histogram stays small (idle draws span tens of watts) where a
	// list of samples would grow with the fleet and the weeks.
	Watts map[int]int `json:"watts"`
	// GPUs counts the idle steps per GPU (host|uuid).
	GPUs    map[string]int `json:"gpus"`
	Samples int            `json:"samples"`
	// memo caches the quantile for a sample count: it is asked for every
	// GPU of the model at every step.
	memo struct {
		samples int
		q, w    float64
	}
}

// floorMemory bounds what the book remembers: past it, every count is
// halved, so that the floor follows a fleet whose boards, drivers or
// power settings change, old steps weighing less than new ones.
const floorMemory = 1 << 16

// blipPercent is the most mean util a step with no work reads: NVML counts
// a context's own housekeeping (the driver, a monitoring probe) as 1-2 %
// now and then (config.Idle.UtilPercent), and no kernel of a workload
// keeps a step's mean that low.
const blipPercent = 2

// contextMiB is the framebuffer use above which a board holds a context: a
// CUDA context takes a few hundred MiB (config.Idle.MemoryHeldMiB), a board
// with none reads a few MiB at most.
const contextMiB = 100

// idleWithContext reports whether a step of a GPU is the floor's kind of
// step, by its counters alone, never by power: a whole GPU with power that
// holds a context (framebuffer in use) and does nothing with it: mean util
// within housekeeping's blips, SM activity under the idle threshold and
// memory-copy util within 1 % (no data moved), where exported. Bare boards
// are left out: they draw less (an L4 16 W, not 35), and a fleet of spare
// GPUs would pull the floor under what every idle holder draws, while a
// bare board sits under the floor whatever it is.
func idleWithContext(g features.GPU, c config.Idle) bool {
	return g.Device == g.UUID && g.HasPowerW && g.PowerW > 0 && g.HasFB && g.FBMaxMiB > contextMiB &&
		g.HasUtil && g.UtilAvg <= blipPercent &&
		(!g.HasSM || g.SMAvg < float64(c.SMActive)) && (!g.HasMemCopy || g.MemCopyAvg <= 1)
}

// observe records one step of one GPU. Every whole GPU with power enters
// its model in the book, idle or not, so that analyze can say which models
// had no idle step and got the published figure.
func (b FloorBook) observe(g features.GPU, c config.Idle) {
	if g.Device != g.UUID || !g.HasPowerW || g.PowerW <= 0 || g.Model == "" {
		return
	}
	m := b[g.Model]
	if m == nil {
		m = &ModelFloor{Watts: map[int]int{}, GPUs: map[string]int{}}
		b[g.Model] = m
	}
	if !idleWithContext(g, c) {
		return
	}
	m.Watts[int(math.Round(g.PowerW))]++
	m.GPUs[g.Host+"|"+g.UUID]++
	m.Samples++
	if m.Samples > floorMemory {
		m.halve()
	}
}

// halve halves every count, dropping those that reach 0.
func (m *ModelFloor) halve() {
	m.Samples = 0
	for w, n := range m.Watts {
		if n /= 2; n == 0 {
			delete(m.Watts, w)
			continue
		}
		m.Watts[w] = n
		m.Samples += n
	}
	for k, n := range m.GPUs {
		if n /= 2; n == 0 {
			delete(m.GPUs, k)
			continue
		}
		m.GPUs[k] = n
	}
}

// quantile is the q-quantile of the idle draws (nearest rank).
func (m *ModelFloor) quantile(q float64) float64 {
	if m.memo.samples == m.Samples && m.memo.q == q {
		return m.memo.w
	}
	ws := make([]int, 0, len(m.Watts))
	for w := range m.Watts {
		ws = append(ws, w)
	}
	sort.Ints(ws)
	rank := max(1, int(math.Ceil(q*float64(m.Samples))))
	seen, out := 0, 0.0
	for _, w := range ws {
		seen += m.Watts[w]
		if out = float64(w); seen >= rank {
			break
		}
	}
	m.memo.samples, m.memo.q, m.memo.w = m.Samples, q, out
	return out
}

// IdleFloor is the idle floor a model was judged by, and where it came
// from: learnt from Samples idle steps of the fleet's GPUs of the model (GPUs
// of them), or the
// published figure (Learned false; Samples then says how many idle steps
// were seen, fewer than were needed). Watts is 0 when neither exists (a
// model the table does not know, never seen idle): power then judges
// nothing on it.
type IdleFloor struct {
	Model   string  `json:"model"`
	Watts   float64 `json:"watts"`
	Learned bool    `json:"learned"`
	Samples int     `json:"idle_samples"`
	GPUs    int     `json:"idle_gpus"`
	// Needed is the idle steps a learnt floor needs (floor_min_samples).
	Needed int `json:"needed"`
}

// floor returns the model's idle floor.
func (b FloorBook) floor(model string, c config.Idle) IdleFloor {
	f := IdleFloor{Model: model, Needed: c.FloorMinSamples}
	if m := b[model]; m != nil {
		f.Samples, f.GPUs = m.Samples, len(m.GPUs)
		if m.Samples >= c.FloorMinSamples {
			f.Watts, f.Learned = m.quantile(float64(c.FloorQuantile)), true
			return f
		}
	}
	if pm, ok := gpumodel.Lookup(model); ok {
		f.Watts = pm.IdleFloorWatts()
	}
	return f
}

// Floors lists the floor of every model the book has seen, by model name.
func (b FloorBook) Floors(c config.Idle) []IdleFloor {
	out := make([]IdleFloor, 0, len(b))
	for model := range b {
		out = append(out, b.floor(model, c))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// aboveFloor is where a whole GPU's mean draw in a step sits between its
// model's idle floor (0) and its power limit (1): the data's limit, else
// the model's TDP. Draws under the floor read 0.
func (b FloorBook) aboveFloor(g features.GPU, c config.Idle) (float64, bool) {
	if !g.HasPowerW || g.Device != g.UUID {
		return 0, false
	}
	floor := b.floor(g.Model, c).Watts
	limit := math.NaN()
	switch m, known := gpumodel.Lookup(g.Model); {
	case g.HasLimit && g.PowerLimitW > 0:
		limit = g.PowerLimitW
	case known:
		limit = m.TDPWatts
	}
	if floor <= 0 || math.IsNaN(limit) || limit <= floor {
		return 0, false
	}
	return math.Max(0, g.PowerW-floor) / (limit - floor), true
}
