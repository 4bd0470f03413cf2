package detect

import "time"

// HeldHours is the GPU-hours an allocation held in its known steps, each of
// its GPUs counted by the accounting's share of it in each step
// (features.Step.Share, the figure usage intervals carry as allocated
// GPU-hours): a whole GPU held for a full step is one step, and the holders
// of a time-sliced GPU split it. A run's waste is what the allocation held
// from the run's start, so that four idle holders of one GPU waste the
// GPU's hours once, not four times. The marks are Total when each run
// began.
type HeldHours struct {
	// Tracked is false on an allocation restored from a state written
	// before shares were counted; its runs then count whole GPUs.
	Tracked bool `json:"tracked,omitempty"`
	// PerGPU is false on an allocation restored from a state written
	// before each GPU's held hours were counted (GPUState.HeldHours).
	PerGPU bool    `json:"per_gpu,omitempty"`
	Total  float64 `json:"total,omitempty"`
	// Idle, IdleHeld and Spin mark Total where IdleSince, IdleHeldSince
	// and SpinSince began; FirstActive where the first activity was.
	Idle        float64 `json:"idle,omitempty"`
	IdleHeld    float64 `json:"idle_held,omitempty"`
	Spin        float64 `json:"spin,omitempty"`
	FirstActive float64 `json:"first_active,omitempty"`
}

// accrue adds a known step's held GPU-hours and marks the runs that began
// in it (their start is runStart) at the total before the step, and the
// first activity, when it was found in this step, at its place in the step.
func (a *Alloc) accrue(stepHeld float64, runStart time.Time, firstActiveNow bool, stepFrac float64) {
	h := &a.Held
	before := h.Total
	h.Total += stepHeld
	mark := func(since time.Time, m *float64) {
		if !since.IsZero() && since.Equal(runStart) {
			*m = before
		}
	}
	mark(a.IdleSince, &h.Idle)
	mark(a.IdleHeldSince, &h.IdleHeld)
	mark(a.SpinSince, &h.Spin)
	if firstActiveNow {
		h.FirstActive = before + stepFrac*stepHeld
	}
}

// heldSince is the GPU-hours the allocation held from a run's start (since,
// marked at mark) to the judged step: its share of each GPU, as the
// accounting counts it. An allocation from an older state, without marks,
// counts each of its GPUs whole.
func (j *judge) heldSince(since time.Time, mark float64) float64 {
	if !j.a.Held.Tracked {
		return j.n * j.since(since).Hours()
	}
	return j.a.Held.Total - mark
}

// heldKnown is the GPU-hours the allocation held in all its known steps by
// its share of each GPU; whole GPUs on an allocation from an older state.
func (j *judge) heldKnown() float64 {
	if !j.a.Held.Tracked {
		return j.n * j.a.KnownHours
	}
	return j.a.Held.Total
}

// gpusHeld is the GPUs the allocation held, by its share of each, averaged
// over its known steps: four holders of one time-sliced GPU hold a quarter
// each. Whole GPUs on an allocation from an older state or with no known
// step.
func (j *judge) gpusHeld() float64 {
	if !j.a.Held.Tracked || j.a.KnownHours <= 0 {
		return j.n
	}
	return j.a.Held.Total / j.a.KnownHours
}

// heldToFirstActive is the GPU-hours the allocation held from its start to
// its first activity (delay), by the same shares.
func (j *judge) heldToFirstActive(delay time.Duration) float64 {
	if !j.a.Held.Tracked {
		return j.n * delay.Hours()
	}
	return j.a.Held.FirstActive
}
