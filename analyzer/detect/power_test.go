package detect

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/schema"
)

const l4 = "NVIDIA L4"

// l4Idle is an L4 whose notebook holds CUDA contexts and runs nothing, as
// dcgm-exporter's default counters read it (no power limit series): util
// 0, memory held, the board at w watts, out of its deepest power state.
func l4Idle(w float64) gpuFn {
	return func(int) *features.GPU {
		return &features.GPU{Samples: 10, HasUtil: true, HasFB: true, FBMaxMiB: 3000, FBTotalMiB: 23034,
			Model: l4, HasPowerW: true, PowerW: w, HasMemCopy: true}
	}
}

// l4Serving is an L4 answering requests: util low (short kernels), the
// board well above its idle draw.
func l4Serving(int) *features.GPU {
	return &features.GPU{Samples: 10, HasUtil: true, UtilAvg: 3, UtilMax: 9, HasFB: true, FBMaxMiB: 9000, FBTotalMiB: 23034,
		Model: l4, HasPowerW: true, PowerW: 55, HasMemCopy: true, MemCopyAvg: 4}
}

func l4Busy(int) *features.GPU {
	return &features.GPU{Samples: 10, HasUtil: true, UtilAvg: 92, UtilMax: 99, HasFB: true, FBMaxMiB: 18000, FBTotalMiB: 23034,
		Model: l4, HasPowerW: true, PowerW: 66, HasSM: true, SMAvg: 0.7, HasDRAM: true, DRAMAvg: 0.4}
}

// l4Hang is an L4 rank waiting in a hung collective: util pinned, its
// channel blocks resident (SM activity in the low tenths), no DRAM or
// tensor work, the board a little over its idle draw with contexts.
func l4Hang(int) *features.GPU {
	return &features.GPU{Samples: 10, HasUtil: true, UtilAvg: 99.5, UtilMax: 100, HasFB: true, FBMaxMiB: 18000, FBTotalMiB: 23034,
		Model: l4, HasPowerW: true, PowerW: 38, HasSM: true, SMAvg: 0.15, HasDRAM: true, DRAMAvg: 0.002, HasTensor: true, TensorAvg: 0.001}
}

// TestL4IdleWithContexts: idle notebooks on L4s draw about 35 W holding
// their contexts, 0.49 of the 72 W TDP, which a veto at 0.4 of TDP took
// for work; judged against the L4's idle floor they are idle sessions,
// with or without a power limit series, while an L4 serving requests at
// low util, its power well above the floor, stays active.
func TestL4IdleWithContexts(t *testing.T) {
	h := 12
	withLimit := func(f gpuFn) gpuFn {
		return with(f, func(g *features.GPU) { g.HasLimit, g.PowerLimitW = true, 72 })
	}
	for _, c := range []struct {
		name string
		gpu  gpuFn
	}{{"no power limit series (TDP)", l4Idle(35)}, {"power limit series", withLimit(l4Idle(35))}} {
		t.Run(c.name, func(t *testing.T) {
			fs, _ := feed(t, config.Default(), 4*h,
				job{pod: "jupyter-ann", kind: schema.KindInteractive, start: 0, end: 4 * h, gpus: []gpuFn{phases(l4Busy, 2, c.gpu)}},
				job{pod: "llm-serve", kind: schema.KindService, start: 0, end: 4 * h, gpus: []gpuFn{l4Serving}})
			got := patterns(fs)
			if !slices.Contains(got["ns/jupyter-ann"], schema.IdleSession) {
				t.Errorf("idle notebook on an L4 at 35 W: %v, want idle_session", got["ns/jupyter-ann"])
			}
			for _, p := range got["ns/llm-serve"] {
				if p == schema.CPUOnly || p == schema.IdleSession {
					t.Errorf("L4 serving at 3 %% util and 55 W: %s, want it active", p)
				}
			}
		})
	}
}

// TestFloorLearntFromFleet: L4s in a warm chassis sit at 47 W holding idle
// contexts, above what the published 35 W floor allows ((47-35)/(72-35) =
// 0.32 > 0.3). Once the fleet has shown floor_min_samples steps with no
// activity, its own floor (47 W) judges, and the notebooks are idle; with
// the published figure only they would never be. The steps are learnt
// from though the veto called them busy: the floor does not depend on it.
func TestFloorLearntFromFleet(t *testing.T) {
	h := 12
	jobs := []job{
		{pod: "jupyter-ann", kind: schema.KindInteractive, start: 0, end: 4 * h, gpus: []gpuFn{phases(l4Busy, 2, l4Idle(47))}},
		{pod: "jupyter-bob", kind: schema.KindInteractive, start: 0, end: 4 * h, gpus: []gpuFn{phases(l4Busy, 2, l4Idle(47))}},
	}
	st := NewState()
	fs, _ := feedState(t, config.Default(), st, 4*h, jobs...)
	got := patterns(fs)
	for _, j := range []string{"ns/jupyter-ann", "ns/jupyter-bob"} {
		if !slices.Contains(got[j], schema.IdleSession) {
			t.Errorf("%s idle at 47 W with a learnt floor: %v, want idle_session", j, got[j])
		}
	}
	f := st.Floors.floor(l4, config.Default().Idle)
	if !f.Learned || f.Watts != 47 || f.GPUs != 2 || f.Samples != 2*(4*h-2) {
		t.Errorf("L4 floor %+v, want learnt 47 W from %d steps of 2 GPUs", f, 2*(4*h-2))
	}

	never := config.Default()
	never.Idle.FloorMinSamples = 1 << 20
	fs, _ = feed(t, never, 4*h, jobs...)
	if got := patterns(fs); slices.Contains(got["ns/jupyter-ann"], schema.IdleSession) {
		t.Errorf("published floor only: the notebook at 47 W is idle (%v), want the veto to hold", got["ns/jupyter-ann"])
	}
}

// TestFloorFallsBackToPublished: a fleet whose GPUs never idled has no
// floor of its own: the model table's figure stands in, and says so; a
// model the table does not know gets none, and power judges nothing there.
func TestFloorFallsBackToPublished(t *testing.T) {
	st := NewState()
	feedState(t, config.Default(), st, 24, job{id: "7", start: 0, end: 24, gpus: []gpuFn{l4Busy,
		with(l4Busy, func(g *features.GPU) { g.Model = "NVIDIA X9000" })}})
	fl := st.Floors.Floors(config.Default().Idle)
	byModel := map[string]IdleFloor{}
	for _, f := range fl {
		byModel[f.Model] = f
	}
	if f := byModel[l4]; f.Learned || f.Watts != 35 || f.Samples != 0 || f.Needed != 36 {
		t.Errorf("busy L4s: floor %+v, want the published 35 W, 0 idle steps of 36 needed", f)
	}
	if f := byModel["NVIDIA X9000"]; f.Learned || f.Watts != 0 {
		t.Errorf("unknown model: floor %+v, want none", f)
	}
	x := features.GPU{Model: "NVIDIA X9000", HasPowerW: true, PowerW: 500, Device: "u", UUID: "u"}
	if _, ok := st.Floors.aboveFloor(x, config.Default().Idle); ok {
		t.Errorf("unknown model without a floor: power judged")
	}
}

// TestL4HangSpinsNearItsFloor: a hung collective on L4s draws a little over
// the board's idle draw with contexts (38 W): near idle against the L4's
// floor (35 W), where the board's bare idle figure (16 W) put it 0.39 of
// the way to the limit, above spin_power_ratio, and missed the hang.
func TestL4HangSpinsNearItsFloor(t *testing.T) {
	h := 12
	fs, _ := feed(t, config.Default(), 4*h, job{id: "9", kind: schema.KindBatch, start: 0, end: 4 * h,
		gpus: []gpuFn{phases(l4Busy, h, l4Hang), phases(l4Busy, h, l4Hang)}})
	var spin *float64
	for _, f := range fs {
		if f.Pattern == schema.Stuck {
			if v, ok := f.Evidence["spin_minutes"]; ok {
				spin = &v
			}
		}
	}
	if spin == nil || *spin < 60 {
		t.Errorf("hung collective on L4s at 38 W: findings %v, want stuck by its spin signature", patterns(fs))
	}
}

// TestFloorBookKeepsAcrossCycles: the floors survive the daemon's state
// (JSON), and a book past its memory halves its counts without moving the
// floor.
func TestFloorBookKeepsAcrossCycles(t *testing.T) {
	c := config.Default().Idle
	b := FloorBook{}
	for i := range 100 {
		g := *l4Idle(float64(30 + i%10))(0)
		g.Host, g.Device, g.UUID = "n1", "GPU-1", "GPU-1"
		b.observe(g, c)
	}
	want := b.floor(l4, c)
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var back FloorBook
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if got := back.floor(l4, c); got != want || !got.Learned || got.Watts != 34 {
		t.Errorf("after a JSON round trip: %+v, want %+v (learnt, 34 W: the median of 30-39 W)", got, want)
	}
	back[l4].halve()
	if got := back.floor(l4, c); got.Samples != 50 || got.Watts != 34 {
		t.Errorf("halved: %+v, want 50 samples and the same 34 W", got)
	}
}

// TestBareBoardsTeachNoFloor: spare L4s without a context draw 16 W; were
// they learnt from, a fleet of many spares would put the floor there and
// veto every idle holder at 35 W again. Only boards holding a context
// teach the floor.
func TestBareBoardsTeachNoFloor(t *testing.T) {
	c := config.Default().Idle
	b := FloorBook{}
	for i := range 1000 {
		g := *l4Idle(16)(0)
		g.FBMaxMiB = 0
		g.Host, g.Device, g.UUID = "n1", "GPU-spare", "GPU-spare"
		b.observe(g, c)
		if i%10 == 0 {
			g := *l4Idle(float64(34 + i%3))(0)
			g.Host, g.Device, g.UUID = "n1", "GPU-nb", "GPU-nb"
			b.observe(g, c)
		}
	}
	if f := b.floor(l4, c); !f.Learned || f.Samples != 100 || f.GPUs != 1 || f.Watts < 34 {
		t.Errorf("floor %+v, want one learnt from the 100 steps holding a context (34-36 W)", f)
	}
}
