package sim

import (
	"math"
	"time"
)

// load is what one workload does to one GPU at one instant, before the
// device's model turns it into watts, degrees and MHz.
type load struct {
	util, memCopy                               float64 // %
	gr, sm, occ, tensor, dram, fp64, fp32, fp16 float64 // ratios 0-1
	power                                       float64 // 0-1 between idle and max power
	memGiB                                      float64 // memory held by the process
	pcie, nvlink                                float64 // fraction of link bandwidth
	process                                     bool    // a process holds the GPU
	spin                                        bool    // busy-looking but no progress (no gpu_idle bit)
}

// noiser draws the noise of one device at one time step.
type noiser struct {
	seed, dev, step uint64
}

func (n noiser) sym(ch uint64) float64 { return sym(n.seed, n.dev, n.step, ch) }

func (n noiser) unit(ch uint64) float64 { return unit(n.seed, n.dev, n.step, ch) }

// noise channels
const (
	chUtil uint64 = iota + 1
	chSM
	chOcc
	chTensor
	chDRAM
	chPower
	chTemp
	chMemTemp
	chClock
	chMem
	chPCIe
	chNVLink
	chCopy
)

// busy is a training-like load at the given mean utilization.
func busy(util float64, memGiB float64, multi bool, n noiser) load {
	u := clamp(util+2.5*n.sym(chUtil), 0, 100)
	f := u / 100
	l := load{
		util:    u,
		memCopy: clamp(38*f+4*n.sym(chCopy), 0, 100),
		gr:      clamp(0.97*f+0.01*n.sym(chUtil+100), 0, 1),
		sm:      clamp(0.84*f+0.03*n.sym(chSM), 0, 1),
		occ:     clamp(0.46*f+0.03*n.sym(chOcc), 0, 1),
		tensor:  clamp(0.41*f+0.04*n.sym(chTensor), 0, 1),
		dram:    clamp(0.48*f+0.04*n.sym(chDRAM), 0, 1),
		fp16:    clamp(0.30*f+0.03*n.sym(chTensor+100), 0, 1),
		fp32:    clamp(0.08*f+0.01*n.sym(chSM+100), 0, 1),
		power:   clamp(0.88*f+0.04*n.sym(chPower), 0, 1),
		memGiB:  memGiB,
		pcie:    clamp(0.08*f+0.02*n.unit(chPCIe), 0, 1),
		process: true,
	}
	if multi {
		l.nvlink = clamp(0.35*f+0.05*n.unit(chNVLink), 0, 1)
	}
	return l
}

// held is a process that holds memory and does nothing.
func held(memGiB float64, n noiser) load {
	return load{memGiB: memGiB, process: true, power: 0.02 + 0.01*n.unit(chPower), sm: 0}
}

// light is low, irregular use (small kernels, a notebook cell, a small model).
func light(util, memGiB float64, n noiser) load {
	u := clamp(util+0.6*util*n.sym(chUtil), 1, 100)
	f := u / 100
	return load{
		util: u, memCopy: clamp(20*f, 0, 100),
		gr: clamp(0.95*f, 0, 1), sm: clamp(0.7*f, 0, 1), occ: clamp(0.3*f, 0, 1),
		tensor: clamp(0.15*f, 0, 1), dram: clamp(0.25*f, 0, 1), fp32: clamp(0.2*f, 0, 1), fp16: clamp(0.1*f, 0, 1),
		power:  clamp(0.05+0.6*f+0.02*n.sym(chPower), 0, 1),
		memGiB: memGiB, pcie: 0.01 * n.unit(chPCIe), process: true,
	}
}

// channelsWaiting is a rank waiting in a collective that never completes,
// as the field reads it: NCCL keeps one block per channel resident, each on
// an SM of its own (NVIDIA/nccl#689), spinning on its peers' flags
// (NVIDIA/nccl#558), so util is pinned and SM activity is the channels'
// share of the SMs, 16-32 of an H100's 132 (0.12-0.24), fixed for the job
// by level (0-1); the blocks do no matrix or memory work, so tensor and
// DRAM activity stay near 0 and the board draws a little over idle, flat.
func channelsWaiting(memGiB, level float64, n noiser) load {
	sm := 0.12 + 0.12*level + 0.005*n.sym(chSM)
	return load{
		util: clamp(99.5+0.5*n.sym(chUtil), 98, 100), gr: clamp(0.99+0.005*n.sym(chUtil+100), 0, 1),
		sm: sm, occ: 0.31 * sm, tensor: 0.001 * n.unit(chTensor), dram: 0.002 + 0.002*n.unit(chDRAM),
		power: 0.07 + 0.01*n.unit(chPower), memGiB: memGiB, process: true, spin: true,
	}
}

// smallBatch is inference at batch size 1 or 2: short kernels back to back
// keep util near util, and occupy few SMs, so SM activity sits in the same
// low tenths as a hung collective; but every token streams the weights
// (DRAM activity, memory-copy util well above 0) through matrix multiplies
// on the tensor pipes, and power follows the request rate, which swings
// over minutes.
func smallBatch(util, memGiB float64, off time.Duration, n noiser) load {
	rate := 0.5 + 0.5*math.Sin(2*math.Pi*off.Minutes()/17)
	return load{
		util: clamp(util+2*n.sym(chUtil), 0, 100), memCopy: clamp(10+10*rate+3*n.sym(chCopy), 0, 100),
		gr: clamp(0.95*util/100, 0, 1), sm: clamp(0.14+0.1*rate+0.02*n.sym(chSM), 0, 1), occ: 0.08,
		tensor: clamp(0.07+0.06*rate+0.01*n.sym(chTensor), 0, 1), dram: clamp(0.14+0.14*rate+0.02*n.sym(chDRAM), 0, 1),
		fp16: 0.05 + 0.04*rate, power: clamp(0.15+0.25*rate+0.03*n.sym(chPower), 0, 1),
		memGiB: memGiB, pcie: 0.01 * n.unit(chPCIe), process: true,
	}
}

// phase reports whether a periodic window of length win is open at off:
// one window per period, placed at a seeded offset within the period so
// that jobs do not stall in lockstep.
func phase(off, period, win time.Duration, seed, wkey uint64) bool {
	if period <= 0 || win <= 0 {
		return false
	}
	idx := uint64(off / period)
	in := off % period
	start := time.Duration(unit(seed, wkey, idx, 0x57a11) * float64(period-win))
	return in >= start && in < start+win
}

// load computes the workload's load on its pos-th GPU, off into the
// allocation (instance) and e since the scenario origin.
func (w *Workload) load(pos int, off, e time.Duration, seed uint64, n noiser) load {
	p := &w.Params
	multi := len(w.GPUs) > 1
	switch w.Behaviour {
	case Training, Overlong:
		return busy(p.Util, p.MemoryGiB, multi, n)
	case BurstyTraining:
		if phase(off, p.StallEvery, p.Stall, seed, w.key) {
			return held(p.MemoryGiB, n)
		}
		return busy(p.Util, p.MemoryGiB, multi, n)
	case InferenceDaily:
		// Trough at the origin's time of day (plus phase), peak half a
		// period later.
		x := float64((e-p.Phase)%p.Period) / float64(p.Period)
		if x < 0 {
			x += 1
		}
		// No request at all around the trough: the model stays loaded.
		if p.Quiet > 0 && math.Min(x, 1-x)*float64(p.Period) < float64(p.Quiet)/2 {
			return held(p.MemoryGiB, n)
		}
		u := p.MinUtil + (p.MaxUtil-p.MinUtil)*(0.5-0.5*math.Cos(2*math.Pi*x))
		l := busy(u, p.MemoryGiB, false, n)
		l.tensor *= 0.7
		return l
	case CPUOnly:
		return load{}
	case HungCollective:
		if off < p.Active {
			return busy(p.Util, p.MemoryGiB, multi, n)
		}
		// A spin-waiting collective: the driver sees a kernel resident all
		// the time (util ≈ 100 %), but almost no SM or memory work, so the
		// board draws near-idle power.
		return load{
			util: clamp(99.5+0.5*n.sym(chUtil), 98, 100), gr: clamp(0.985+0.01*n.sym(chSM), 0, 1),
			sm: 0.012 + 0.01*n.unit(chSM), occ: 0.01 + 0.005*n.unit(chOcc), dram: 0.002 + 0.003*n.unit(chDRAM),
			power: 0.05 + 0.02*n.unit(chPower), memGiB: p.MemoryGiB, process: true, spin: true,
		}
	case NCCLHang:
		if off < p.Active {
			return busy(p.Util, p.MemoryGiB, multi, n)
		}
		return channelsWaiting(p.MemoryGiB, unit(seed, w.key, 0, chSM), n)
	case SmallBatch:
		return smallBatch(p.Util, p.MemoryGiB, off, n)
	case StuckIdle:
		if off < p.Active {
			return busy(p.Util, p.MemoryGiB, multi, n)
		}
		return held(p.MemoryGiB, n)
	case IdleNotebook:
		if off < p.Active {
			return light(p.Util, p.MemoryGiB, n)
		}
		return held(p.MemoryGiB, n)
	case Notebook:
		if phase(off, p.Every, p.Burst, seed, w.key) {
			return light(p.Util, p.MemoryGiB, n)
		}
		return held(p.MemoryGiB, n)
	case StartupDelay:
		if off < p.Delay {
			return load{}
		}
		return busy(p.Util, p.MemoryGiB, multi, n)
	case LowUtil:
		return light(p.Util, p.MemoryGiB, n)
	case PartialGPUs:
		if pos >= len(w.GPUs)-p.IdleGPUs {
			return load{}
		}
		return busy(p.Util, p.MemoryGiB, pos > 0 || len(w.GPUs)-p.IdleGPUs > 1, n)
	case Orphan:
		return busy(p.Util, p.MemoryGiB, multi, n)
	}
	return load{}
}

// orphanLoad is the load after an orphan workload's allocation ended: the
// process still holds its memory, doing nothing.
func (w *Workload) orphanLoad(n noiser) load {
	return held(w.Params.MemoryGiB, n)
}

// cpuSeconds is the CPU time the job has used off into its allocation;
// an analytic function of off, so it is monotonic and cheap.
func (w *Workload) cpuSeconds(off time.Duration) float64 {
	p := &w.Params
	s := off.Seconds()
	switch w.Behaviour {
	case IdleNotebook:
		a := math.Min(s, p.Active.Seconds())
		return p.CPUCores*a + 0.02*math.Max(0, s-a)
	case StuckIdle, HungCollective, NCCLHang:
		a := math.Min(s, p.Active.Seconds())
		return 6*a + p.CPUCores*math.Max(0, s-a)
	case StartupDelay:
		d := math.Min(s, p.Delay.Seconds())
		return 1*d + p.CPUCores*math.Max(0, s-d)
	}
	return p.CPUCores * s
}

// defaultCommand is the process command line of a behaviour.
func (w *Workload) command() string {
	if w.Command != "" {
		return w.Command
	}
	switch w.Behaviour {
	case IdleNotebook, Notebook:
		return "python -m ipykernel_launcher"
	case InferenceDaily:
		return "python -m vllm.entrypoints.openai.api_server"
	case LowUtil:
		return "python eval.py"
	case SmallBatch:
		return "python generate.py --batch-size 1"
	}
	return "python train.py"
}
