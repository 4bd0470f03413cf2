package fieldgen

import (
	"math/rand/v2"
	"time"
)

// perGPU is a fixed per-GPU share in [0, 1) (memory footprints and power
// differ a little between the ranks of one job).
func perGPU(gpu int, salt float64) float64 {
	x := float64(gpu)*0.6180339887 + salt
	return x - float64(int(x))
}

func busy(rng *rand.Rand, util, memGiB float64, m Model) Reading {
	u := util + noise(rng, 2.5)
	return Reading{Util: u, MemCopy: 28 + noise(rng, 6), FBUsedMiB: memGiB*1024 + noise(rng, 40),
		PowerW:   m.IdleW + (m.TDPW-m.IdleW)*(0.15+0.75*u/100) + noise(rng, 8),
		GrActive: 0.86*u/100 + noise(rng, 0.02), Tensor: 0.38 + noise(rng, 0.04), DRAM: 0.42 + noise(rng, 0.04)}
}

// Training ramps to full load over its first six minutes (compilation,
// the data loader's warm-up), then runs steps at peak util with a four-
// minute evaluation at half load every 30 minutes and, every two hours, a
// three-minute checkpoint in which the GPU waits on storage with its
// memory held.
func Training(peak float64) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		mem := 52 + 14*perGPU(gpu, 0.3)
		switch {
		case t < 6*time.Minute:
			f := t.Minutes() / 6
			return busy(rng, peak*f, 2+mem*f, m)
		case t > 2*time.Hour && t%(2*time.Hour) < 3*time.Minute:
			return Reading{Util: float64(rng.IntN(3)), FBUsedMiB: mem * 1024, PowerW: m.IdleW + 18 + noise(rng, 3), GrActive: 0.01}
		case t%(30*time.Minute) >= 26*time.Minute:
			return busy(rng, peak*0.45, mem, m)
		}
		return busy(rng, peak, mem, m)
	}
}

// InputBound trains on a pipeline that cannot feed it: each reading
// catches the GPU either computing or waiting for the next batch, about
// half the time each; the profiling counters, averaged over the interval,
// read the mean.
func InputBound() Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		r := busy(rng, 90, 30, m)
		if rng.Float64() >= 0.48 {
			r.Util = 3 + noise(rng, 2)
		}
		r.GrActive, r.Tensor, r.DRAM = 0.41+noise(rng, 0.04), 0.16, 0.22
		r.PowerW = m.IdleW + (m.TDPW-m.IdleW)*0.42 + noise(rng, 10)
		return r
	}
}

// BurstyService serves requests that come in bursts: a model loaded in
// memory, and each reading catching a burst about 45 % of the time.
func BurstyService() Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		r := Reading{Util: noise(rng, 0.7), FBUsedMiB: 22*1024 + noise(rng, 30), PowerW: m.IdleW + 25 + noise(rng, 4), GrActive: 0.02}
		if rng.Float64() < 0.45 {
			r = busy(rng, 72, 22, m)
		}
		r.GrActive = 0.3 + noise(rng, 0.05)
		return r
	}
}

// CPUFallback is a CUDA image whose framework found no usable GPU path
// and runs on the CPU: a CUDA context is created (a few hundred MiB) and
// nothing ever runs on the GPU.
func CPUFallback() Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		u := 0.0
		if rng.IntN(30) == 0 {
			u = 1
		}
		return Reading{Util: u, FBUsedMiB: 420 + noise(rng, 4), PowerW: m.IdleW + 4 + noise(rng, 2)}
	}
}

// IdleNotebook is a session used for active (cells run now and then,
// memory growing as models load), then left open: memory held, nothing
// runs.
func IdleNotebook(active time.Duration) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		mem := 3 + 6*min(1, t.Minutes()/active.Minutes())
		if t < active {
			if rng.Float64() < 0.2 {
				return busy(rng, 60, mem, m)
			}
			return Reading{Util: float64(rng.IntN(2)), FBUsedMiB: mem * 1024, PowerW: m.IdleW + 10 + noise(rng, 3)}
		}
		return Reading{Util: 0, FBUsedMiB: 9 * 1024, PowerW: m.IdleW + 6 + noise(rng, 2), GrActive: 0}
	}
}

// Hung trains until at, then hangs in a collective: every rank spins in
// an NCCL kernel waiting for a peer that never comes. GPU_UTIL counts the
// time a kernel runs, so it reads 100 %; the spinning warp keeps the SMs
// and memory all but idle and the power near its floor.
func Hung(at time.Duration) Shape {
	train := Training(96)
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if t < at {
			return train(rng, t, gpu, m)
		}
		mem := 52 + 14*perGPU(gpu, 0.3)
		return Reading{Util: 100, MemCopy: 0, FBUsedMiB: mem * 1024, PowerW: m.IdleW + 0.12*(m.TDPW-m.IdleW) + noise(rng, 3),
			GrActive: 0.03 + noise(rng, 0.005), Tensor: 0, DRAM: 0.002}
	}
}

// Partial is a job given several GPUs that computes on the first only:
// the others hold a context and nothing else.
func Partial() Shape {
	train := Training(95)
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if gpu == 0 {
			return train(rng, t, gpu, m)
		}
		return Reading{Util: 0, FBUsedMiB: 480 + noise(rng, 4), PowerW: m.IdleW + 5 + noise(rng, 2)}
	}
}

// SlowStart holds its GPUs while it stages data and waits for its first
// kernel (nothing on the GPUs, not even a context), then trains.
func SlowStart(delay time.Duration) Shape {
	train := Training(94)
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if t < delay {
			return idle(rng, m)
		}
		return train(rng, t-delay, gpu, m)
	}
}

// LightModel runs a small model on a large GPU: short kernels, about 12 %
// of the time, a little memory.
func LightModel() Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		u := 12 + noise(rng, 5)
		return Reading{Util: u, MemCopy: 4 + noise(rng, 1.5), FBUsedMiB: 6*1024 + noise(rng, 20), PowerW: m.IdleW + 35 + noise(rng, 6),
			GrActive: 0.1 + noise(rng, 0.02), Tensor: 0.02, DRAM: 0.05}
	}
}
