package fieldgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// The borderline site holds what Corpus leaves out on purpose: cases whose
// readings sit just inside or just outside one of gpuwatch's detector
// thresholds (within a quarter of it), one threshold per pair, so that
// moving a threshold by 25 % changes what the analyzer finds. What a case
// is (a CPU job, a hung collective, a serial kernel doing real work) is
// written on it as in Corpus; only where its readings fall was chosen
// against a threshold. Where two cases read alike to every counter but
// one, the analyzer cannot be right about both once that counter's
// threshold moves, which is what the sensitivity table is for.

// The field's readings the borderline labels follow, beside Corpus' own.
const (
	whyProbe = "a CPU-bound job whose loop touches its GPU (a device query, a synchronize, a tiny " +
		"kernel) reads a few percent of util and computes nothing there: Job Defense Shield's " +
		"zero-utilization check and Run:ai's idle-GPU rule count such a GPU unused"
	whyLockedClocks = "a GPU whose clocks an administrator locked high (nvidia-smi --lock-gpu-clocks) " +
		"draws a third of its TDP at 0 % util: the job on it is still a CPU job"
	whyDecoder = "the A100's hardware JPEG and video decoders (NVJPG, NVDEC, used by DALI) work while " +
		"GPU_UTIL, which counts the SMs' kernels, reads a few percent: the GPU is in use"
	whySerial = "a kernel that keeps one block resident (a serial solver, a persistent loop over a small " +
		"buffer) reads 100 % util and computes: slow, not stuck; with SM activity exported it is light use"
	whyLaunchBound = "a launch-bound loop of tiny kernels (an RL environment stepped on the GPU) keeps a " +
		"kernel resident most of the time with little power or memory traffic: real work"
	whyEvalRank = "a rank that only evaluates now and then did work: Job Defense Shield counts a GPU " +
		"unused only at 0 % throughout the job"
	whyProbeRank = "a rank that only runs the launcher's warm-up and a health probe every two hours holds " +
		"its GPU for nothing: Job Defense Shield's multi-GPU check"
	whyModerate = "Job Defense Shield's low-utilization check (GPU Model Too Powerful) flags jobs under 15 % " +
		"util; a job near 22 % uses a fifth of the GPU, above that line"
	whyPeak = "right-sizing sizes for the peak (Kubernetes' VPA recommends from a high percentile): a " +
		"service whose daily peak takes 45 % of the GPU outgrows a 3g MIG slice (3/7 of the SMs) then"
	whyCancelRule = "Job Defense Shield cancels a job whose GPUs stay at 0 % for 120 minutes (cancel_minutes: " +
		"120): one that ends sooner is past the rule's reach, one that runs on is what it cancels"
	whyFirstWarning = "Job Defense Shield's first warning on GPUs at 0 % comes at 60 minutes " +
		"(first_warning_minutes: 60): a job over in 50 is not warned, one of 70 is"
	whyCheckpoint = "a checkpoint written to slow storage leaves the GPU idle with its memory held for part " +
		"of the job's work; Northeastern's IdleBot acts on an hour under-utilized, which a 50-minute write is not"
	whyDeadlock = "Northeastern's IdleBot cancels jobs under-utilized for an hour: a job deadlocked 70 minutes " +
		"before its user killed it is past it"
	whySlowRank = "a collective waits for its slowest rank; PyTorch's collective timeout was 30 minutes " +
		"(pytorch/pytorch#110947): one that completes in 25 waited, one spinning 35 is past any watchdog"
	whyStaging = "image pulls and data staging take minutes; Northeastern's IdleBot first mails a user " +
		"after 15 minutes under-utilized: 12 minutes of staging is not held for nothing, 18 is"
	whyCuller = "jupyterhub-idle-culler's documented timeout is an hour (--timeout=3600): a session idle " +
		"50 minutes is kept, one idle 70 is culled, its idle time lost"
	whySessionLimit = "the site limits interactive sessions to 24 h (Open OnDemand's and JupyterHub's " +
		"session limits are the operator's): a notebook training past it is over its limit"
)

// signals is a steady reading: util (dithered between whole percents so
// the step mean is util), the profiling activities, memory-copy util,
// memory in use, and power as a share of the way from idle to TDP (above)
// or of TDP (ofTDP, when set).
type signals struct {
	util, sm, dram, tensor, memCopy, fbMiB float64
	above, ofTDP                           float64
}

// dither draws a whole percent whose mean is x.
func dither(rng *rand.Rand, x float64) float64 {
	f := math.Floor(x)
	if rng.Float64() < x-f {
		return f + 1
	}
	return f
}

func steady(s signals) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		p := m.IdleW + s.above*(m.TDPW-m.IdleW)
		if s.ofTDP > 0 {
			p = s.ofTDP * m.TDPW
		}
		u := dither(rng, s.util)
		return Reading{Util: u, MemCopy: dither(rng, s.memCopy), FBUsedMiB: s.fbMiB + noise(rng, 4), PowerW: p + noise(rng, 3),
			GrActive: math.Min(1, u/100), SM: s.sm + noise(rng, s.sm/20), DRAM: s.dram + noise(rng, s.dram/20), Tensor: s.tensor}
	}
}

// then runs first until at, and after from there on (its clock restarted).
func then(first Shape, at time.Duration, after Shape) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if t < at {
			return first(rng, t, gpu, m)
		}
		return after(rng, t-at, gpu, m)
	}
}

// every runs burst for length from offset into each period, base the rest
// of the time.
func every(base Shape, period, offset, length time.Duration, burst Shape) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if x := t % period; x >= offset && x < offset+length {
			return burst(rng, t, gpu, m)
		}
		return base(rng, t, gpu, m)
	}
}

// ranks runs lead on a work's first GPU and rest on the others.
func ranks(lead, rest Shape) Shape {
	return func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading {
		if gpu == 0 {
			return lead(rng, t, gpu, m)
		}
		return rest(rng, t, gpu, m)
	}
}

// hangAfter trains for at, then spins in a collective with these readings.
func hangAfter(at time.Duration, s signals) Shape { return then(Training(96), at, steady(s)) }

// Borderline is the near-threshold site: six A100 nodes scraped at 15 s,
// 30 hours, one case per GPU, every case starting after an hour in which
// its GPU is free (the analyzer learns each board's idle draw there).
// Runtime limits are the site's: interactive sessions 24 h.
func Borderline() *Site {
	s := &Site{Span: 30 * time.Hour}
	for i := 0; i < 6; i++ {
		s.Nodes = append(s.Nodes, Node{Host: fmt.Sprintf("edge-a%02d", i+1), Model: A100, GPUs: 8, Interval: 15 * time.Second})
	}
	for _, cases := range []func() []Work{idleBorder, shareBorder, spinBorder, lightBorder, durationBorder} {
		s.Work = append(s.Work, cases()...)
	}
	return s
}

// light is the reading a case of light use may also get.
var light = []schema.Pattern{schema.LowUtilization}

// bare is a GPU holding a CUDA context and nothing else.
var bare = signals{fbMiB: 480, above: 0.015}

// spin is a rank spinning in a collective: util pinned, model in memory.
func spin(sm, dram, memCopy, above float64) signals {
	return signals{util: 100, sm: sm, dram: dram, memCopy: memCopy, fbMiB: 58 * 1024, above: above}
}

// serial is one block resident all the time over a small buffer.
func serial(sm, dram, memCopy, above float64) signals {
	return signals{util: 99.6, sm: sm, dram: dram, memCopy: memCopy, fbMiB: 3 * 1024, above: above}
}

// idleBorder: the idle thresholds, which decide whether a step did work.
func idleBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// idle.util_percent (5): 4.5 % is a probe, 5.6 % a light model.
		{Case: "CPU job probing its GPU, util 4.5 %", Node: "edge-a01", GPUs: []int{0}, Holder: slurm("81001"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 4.5, sm: 0.004, dram: 0.002, memCopy: 0.3, fbMiB: 610, above: 0.02}),
			Waste: waste(schema.CPUOnly, 6), Also: light, Why: whyProbe},
		{Case: "small model at util 5.6 %", Node: "edge-a01", GPUs: []int{1}, Holder: slurm("81002"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 5.6, sm: 0.005, dram: 0.01, memCopy: 1, fbMiB: 900, above: 0.04}),
			Waste: waste(schema.LowUtilization, 8*(1-0.056)), Why: whyLight},
		// idle.sm_active (0.01).
		{Case: "CUDA context with a polling thread, SM activity 0.0087", Node: "edge-a01", GPUs: []int{2}, Holder: slurm("81003"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.0087, dram: 0.001, fbMiB: 500, above: 0.015}),
			Waste: waste(schema.CPUOnly, 6), Also: light, Why: whyProbe},
		{Case: "sparse kernels on a few SMs, util 3.5 %, SM activity 0.011", Node: "edge-a01", GPUs: []int{3}, Holder: slurm("81004"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 3.5, sm: 0.011, dram: 0.006, memCopy: 1, fbMiB: 900, above: 0.03}),
			Waste: waste(schema.LowUtilization, 6*(1-0.011)), Why: whyLight, Profiling: true},
		// idle.power_veto_ratio (0.4 of TDP).
		{Case: "CPU job on a GPU with locked clocks, 0.35 of TDP", Node: "edge-a01", GPUs: []int{4}, Holder: slurm("81005"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.002, dram: 0.001, fbMiB: 520, ofTDP: 0.35}),
			Waste: waste(schema.CPUOnly, 6), Also: light, Why: whyLockedClocks},
		{Case: "training, then 90 minutes decoding on the hardware decoders at 0.45 of TDP", Node: "edge-a01", GPUs: []int{5}, Holder: slurm("81006"),
			Start: 1 * h, End: 4*h + 30*m,
			Shape: then(Training(95), 2*h, steady(signals{util: 2, sm: 0.004, dram: 0.03, memCopy: 2, fbMiB: 6 * 1024, ofTDP: 0.45})),
			Why:   whyDecoder},
		// idle.memory_held_mib (1024).
		{Case: "CPU job with a cuDNN workspace, 900 MiB", Node: "edge-a01", GPUs: []int{6}, Holder: slurm("81007"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.001, fbMiB: 900, above: 0.015}),
			Waste: waste(schema.CPUOnly, 6), Why: whyZeroUtil},
		{Case: "small LSTM deadlocked after 2 h, holding 1.15 GiB", Node: "edge-a01", GPUs: []int{7}, Holder: slurm("81008"), Start: 1 * h, End: 6 * h,
			Shape: then(steady(signals{util: 60, sm: 0.4, dram: 0.2, memCopy: 18, fbMiB: 1150, above: 0.4}), 2*h,
				steady(signals{util: 0.05, fbMiB: 1150, above: 0.02})),
			Waste: waste(schema.Stuck, 3), Why: "a deadlocked job holds its GPU with nothing running: " + whyHung},
	}
}

// shareBorder: the share of steps that makes a GPU of a job unused.
func shareBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// over_requested.max_active_ratio (0.05 of the steps).
		{Case: "2 GPUs, the second runs only probes (6 of 144 steps)", Node: "edge-a02", GPUs: []int{0, 1}, Holder: slurm("81009"), Start: 1 * h, End: 13 * h,
			Shape: ranks(Training(95), every(steady(bare), 2*h, time.Minute, time.Minute, steady(signals{util: 40, sm: 0.3, dram: 0.1, fbMiB: 480, above: 0.2}))),
			Waste: waste(schema.OverRequested, 12), Why: whyProbeRank},
		{Case: "2 GPUs, the second evaluates 8 times in 12 h", Node: "edge-a02", GPUs: []int{2, 3}, Holder: slurm("81010"), Start: 1 * h, End: 13 * h,
			Shape: ranks(Training(95), every(steady(signals{fbMiB: 2048, above: 0.015}), 90*m, time.Minute, 3*m, steady(signals{util: 85, sm: 0.7, dram: 0.4, memCopy: 25, fbMiB: 2048, above: 0.6}))),
			Why:   whyEvalRank},
	}
}

// spinBorder: the hung-collective signature's limits, a hang just inside
// each beside real work just outside it.
func spinBorder() []Work {
	h := time.Hour
	return []Work{
		// stuck.spin_util_percent (90).
		{Case: "launch-bound tiny kernels at util 78 %", Node: "edge-a02", GPUs: []int{4}, Holder: slurm("81011"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 78, sm: 0.03, dram: 0.02, memCopy: 2, fbMiB: 5 * 1024, above: 0.15}),
			Also:  light, Why: whyLaunchBound},
		// stuck.spin_power_ratio (0.25 of the way from idle to TDP).
		{Case: "hung collective drawing 0.215 above idle", Node: "edge-a02", GPUs: []int{5, 6}, Holder: slurm("81012"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.215)), Waste: waste(schema.Stuck, 2*5), Why: whyHung},
		{Case: "serial kernel at 0.28 above idle", Node: "edge-a02", GPUs: []int{7}, Holder: slurm("81013"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.01, 2, 0.28)), Also: light, Why: whySerial},
		// stuck.spin_mem_copy_percent (5).
		{Case: "hung collective polling a flag, memory-copy util 4.4 %", Node: "edge-a03", GPUs: []int{0, 1}, Holder: slurm("81014"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.01, 4.4, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung},
		{Case: "serial kernel streaming a small buffer, memory-copy util 5.6 %", Node: "edge-a03", GPUs: []int{2}, Holder: slurm("81015"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.04, 5.6, 0.15)), Also: light, Why: whySerial},
		// stuck.spin_sm_active (0.3): a hang keeps one block per NCCL
		// channel resident, 32 channels of an A100's 108 SMs reading 0.28
		// (NVIDIA/nccl#689); a persistent kernel on a third of the SMs
		// computes.
		{Case: "hung collective, 32 channel blocks resident, SM activity 0.28", Node: "edge-a03", GPUs: []int{3, 4}, Holder: slurm("81016"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.28, 0.005, 1, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung},
		{Case: "persistent kernel, SM activity 0.33", Node: "edge-a03", GPUs: []int{5}, Holder: slurm("81017"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.33, 0.01, 1, 0.12)), Also: light, Why: whySerial, Profiling: true},
		// stuck.spin_dram_active (0.05).
		{Case: "hung collective, DRAM activity 0.045", Node: "edge-a03", GPUs: []int{6, 7}, Holder: slurm("81018"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.045, 3, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung},
		{Case: "serial kernel, DRAM activity 0.056", Node: "edge-a04", GPUs: []int{0}, Holder: slurm("81019"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.056, 3, 0.12)), Also: light, Why: whySerial, Profiling: true},
	}
}

// lightBorder: light use and the site's session limit.
func lightBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// low_utilization.max_mean_util_percent (20).
		{Case: "light model at util 17.5 %", Node: "edge-a04", GPUs: []int{1}, Holder: slurm("81020"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 17.5, sm: 0.13, dram: 0.08, memCopy: 6, fbMiB: 6 * 1024, above: 0.12}),
			Waste: waste(schema.LowUtilization, 8*(1-0.175)), Why: whyLight},
		{Case: "inference at util 22.5 %, SM activity 0.17", Node: "edge-a04", GPUs: []int{2}, Holder: slurm("81021"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 22.5, sm: 0.17, dram: 0.1, memCopy: 8, fbMiB: 6 * 1024, above: 0.15}),
			Why:   whyModerate},
		// low_utilization.max_peak_ratio (0.4).
		{Case: "light job with a 40-minute phase at 36 %", Node: "edge-a04", GPUs: []int{3}, Holder: slurm("81022"), Start: 1 * h, End: 9 * h,
			Shape: every(steady(signals{util: 8, sm: 0.07, dram: 0.04, memCopy: 3, fbMiB: 6 * 1024, above: 0.08}), 8*h, 4*h, 40*m,
				steady(signals{util: 36, sm: 0.35, dram: 0.15, memCopy: 10, fbMiB: 6 * 1024, above: 0.25})),
			Waste: waste(schema.LowUtilization, 8*(1-(8*22+36*2)/24.0/100)), Why: whyLight},
		{Case: "service whose daily peak takes 45 % for 40 minutes", Node: "edge-a04", GPUs: []int{4}, Holder: pod("serving", "recs-6c8d9f7b5d-k4w2z"), Start: 1 * h, End: 9 * h,
			Shape: every(steady(signals{util: 8, sm: 0.07, dram: 0.04, memCopy: 3, fbMiB: 6 * 1024, above: 0.08}), 8*h, 4*h, 40*m,
				steady(signals{util: 45, sm: 0.44, dram: 0.2, memCopy: 12, fbMiB: 6 * 1024, above: 0.3})),
			Why: whyPeak},
		// overlong.max_runtime.interactive (the site's 24 h).
		{Case: "notebook training for 21 h", Node: "edge-a04", GPUs: []int{5}, Holder: pod("lab", "jupyter-dana"), Start: 1 * h, End: 22 * h,
			Shape: Training(90), Why: whySessionLimit},
		{Case: "notebook training for 27 h", Node: "edge-a04", GPUs: []int{6}, Holder: pod("lab", "jupyter-erin"), Start: 1 * h, End: 28 * h,
			Shape: Training(90), Waste: waste(schema.Overlong, 0), Why: whySessionLimit},
	}
}

// notebookIdle is a session that trains, then sits idle with its model
// in memory.
func notebookIdle(train time.Duration) Shape {
	return then(Training(90), train, steady(signals{fbMiB: 9 * 1024, above: 0.02}))
}

// durationBorder: how long a condition must last, a case ending just
// short of each limit beside one running just past it.
func durationBorder() []Work {
	h, m := time.Hour, time.Minute
	held := steady(signals{fbMiB: 40 * 1024, above: 0.02})
	return []Work{
		// patterns.cpu_only.min_duration (2h).
		{Case: "CPU job ending after 1 h 45 m", Node: "edge-a04", GPUs: []int{7}, Holder: slurm("81023"), Start: 1 * h, End: 2*h + 45*m,
			Shape: CPUFallback(), Why: whyCancelRule},
		{Case: "CPU job of 2 h 20 m", Node: "edge-a05", GPUs: []int{0}, Holder: slurm("81024"), Start: 1 * h, End: 3*h + 20*m,
			Shape: CPUFallback(), Waste: waste(schema.CPUOnly, 2+20.0/60), Why: whyCancelRule},
		// patterns.over_requested.min_duration (1h).
		{Case: "2 GPUs computing on one, 50 minutes", Node: "edge-a05", GPUs: []int{1, 2}, Holder: slurm("81025"), Start: 1 * h, End: 1*h + 50*m,
			Shape: Partial(), Why: whyFirstWarning},
		{Case: "2 GPUs computing on one, 70 minutes", Node: "edge-a05", GPUs: []int{3, 4}, Holder: slurm("81026"), Start: 1 * h, End: 2*h + 10*m,
			Shape: Partial(), Waste: waste(schema.OverRequested, 70.0/60), Why: whyFirstWarning},
		// patterns.stuck.idle_duration (1h).
		{Case: "training, then a 50-minute checkpoint write to slow storage", Node: "edge-a05", GPUs: []int{5}, Holder: slurm("81027"), Start: 1 * h, End: 3*h + 50*m,
			Shape: then(Training(95), 2*h, held), Why: whyCheckpoint},
		{Case: "training, then deadlocked 70 minutes until killed", Node: "edge-a05", GPUs: []int{6}, Holder: slurm("81028"), Start: 1 * h, End: 4*h + 10*m,
			Shape: then(Training(95), 2*h, held), Waste: waste(schema.Stuck, 70.0/60), Why: whyDeadlock},
		// patterns.stuck.spin_duration (30m).
		{Case: "collective waiting 25 minutes for a slow rank, then training on", Node: "edge-a06", GPUs: []int{0, 1}, Holder: slurm("81029"), Start: 1 * h, End: 5*h + 25*m,
			Shape: then(hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.1)), 2*h+25*m, Training(96)), Why: whySlowRank},
		{Case: "hung collective killed after 35 minutes", Node: "edge-a06", GPUs: []int{2, 3}, Holder: slurm("81030"), Start: 1 * h, End: 3*h + 35*m,
			Shape: hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.1)), Waste: waste(schema.Stuck, 2*35.0/60), Why: whySlowRank},
		// patterns.startup_overhead.min_delay (15m).
		{Case: "12 minutes staging before the first kernel", Node: "edge-a06", GPUs: []int{4}, Holder: slurm("81031"), Start: 1 * h, End: 5 * h,
			Shape: SlowStart(12 * m), Why: whyStaging},
		{Case: "18 minutes staging before the first kernel", Node: "edge-a06", GPUs: []int{5}, Holder: slurm("81032"), Start: 1 * h, End: 5 * h,
			Shape: SlowStart(18 * m), Waste: waste(schema.StartupOverhead, 18.0/60), Why: whyStaging},
		// patterns.idle_session.min_duration (1h).
		{Case: "notebook idle 50 minutes after 3 h of training, then stopped", Node: "edge-a06", GPUs: []int{6}, Holder: pod("lab", "jupyter-fay"), Start: 1 * h, End: 4*h + 50*m,
			Shape: notebookIdle(3 * h), Why: whyCuller},
		{Case: "notebook idle 70 minutes after 3 h of training, then culled", Node: "edge-a06", GPUs: []int{7}, Holder: pod("lab", "jupyter-gus"), Start: 1 * h, End: 5*h + 10*m,
			Shape: notebookIdle(3 * h), Waste: waste(schema.IdleSession, 70.0/60), Why: whyCuller},
	}
}
