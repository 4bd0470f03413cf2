package detect

import (
	"fmt"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// stuck: a job that worked, then stopped making progress while holding its
// GPUs: either every GPU idle with memory held, or the spin-waiting
// collective signature (util pinned high, no real work underneath).
func init() {
	register(schema.Stuck, Spec{judge: judgeStuck,
		Advise: func(*finding.Finding) string {
			return "Stopped making progress while holding the GPUs: set a collective timeout (NCCL_TIMEOUT / torch.distributed timeout) and a watchdog that exits on no progress, and checkpoint so a restart loses little."
		}})
}

func judgeStuck(j *judge) *verdict {
	a, c := j.a, j.cfg.Patterns.Stuck
	switch {
	case !a.SpinSince.IsZero() && j.since(a.SpinSince) >= c.SpinDuration.D():
		spin := j.since(a.SpinSince)
		return &verdict{from: a.SpinSince, wasted: j.heldSince(a.SpinSince, a.Held.Spin),
			evidence: map[string]float64{"spin_minutes": spin.Minutes(), "gpus": j.n,
				"threshold_minutes": c.SpinDuration.D().Minutes()},
			advice: fmt.Sprintf("GPUs pinned near 100%% util with no memory traffic or power behind it for %s: a collective is spin-waiting (hung rank or NCCL timeout).", dur(spin))}
	case !j.interactive && !j.service && !a.FirstActive.IsZero() && !a.IdleHeldSince.IsZero() &&
		j.since(a.IdleHeldSince) >= c.IdleDuration.D():
		// A service idles between requests and overnight; idleness there
		// is capacity to scale down, not a hang.
		idle := j.since(a.IdleHeldSince)
		return &verdict{from: a.IdleHeldSince, wasted: j.heldSince(a.IdleHeldSince, a.Held.IdleHeld),
			evidence: map[string]float64{"idle_minutes": idle.Minutes(), "gpus": j.n, "fb_max_mib": j.fbMax,
				"threshold_minutes": c.IdleDuration.D().Minutes()},
			advice: fmt.Sprintf("GPU activity stopped %s ago while memory is still held: the job looks hung.", dur(idle))}
	}
	return nil
}

// spin is the hung-collective signature on one GPU in one step: the engine
// reads busy (util, or graphics-engine activity on MIG) while everything
// that real work moves stays at rest. Each signal present must agree; at
// least one that measures work (SM or DRAM activity, or power against its
// model's idle floor and limit, FloorBook) must be present, because util alone cannot
// tell a spin from work. Tensor activity and memory-copy util, where
// exported, can only veto.
//
// SM activity is not near 0 in a real hang: NCCL keeps one block per
// channel resident, each on an SM of its own, spinning on its peers'
// flags (see config.Stuck.SpinSMActive), so an H100 reads 0.1-0.25. What
// tells that from small-batch inference, whose SM activity sits in the
// same low tenths, is the work underneath: DRAM and tensor activity near 0
// and power near idle. dcgm-exporter's default counters have none of the
// activity ratios: there the signature rests on power near idle and
// memory-copy util near 0, which still keeps small-batch inference apart
// (it streams its weights: memory-copy util well above 5 %) but cannot
// tell a hang from a kernel that computes in registers without touching
// memory at idle power.
func (d *Detector) spin(st *State, g features.GPU) bool {
	c := d.cfg.Patterns.Stuck
	var busy float64
	switch {
	case g.HasUtil:
		busy = g.UtilAvg
	case g.HasGR:
		busy = g.GRAvg * 100
	default:
		return false
	}
	if busy < float64(c.SpinUtilPercent) {
		return false
	}
	measured := false
	if g.HasSM {
		if g.SMAvg > float64(c.SpinSMActive) {
			return false
		}
		measured = true
	}
	if g.HasDRAM {
		if g.DRAMAvg > float64(c.SpinDRAMActive) {
			return false
		}
		measured = true
	}
	if g.HasTensor && g.TensorAvg > float64(c.SpinDRAMActive) {
		return false
	}
	if g.HasMemCopy && g.MemCopyAvg > float64(c.SpinMemCopyPercent) {
		return false
	}
	if r, ok := st.Floors.aboveFloor(g, d.cfg.Idle); ok {
		if r > float64(c.SpinPowerRatio) {
			return false
		}
		measured = true
	}
	return measured
}
