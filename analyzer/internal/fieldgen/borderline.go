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
		"kernel) reads a few percent of util: Job Defense Shield's zero-utilization check counts a GPU " +
		"unused only at 0 %, so at 4.5 % it is its low-utilization check (under 15 % util) that counts " +
		"the job, as light use"
	whyAboveZero = "Job Defense Shield counts a GPU unused only at 0 %: a job whose kernels run a few " +
		"percent of the time uses its GPU, lightly (its low-utilization check, under 15 % util)"
	whyCullerThread = "jupyterhub-idle-culler culls a server whose kernels ran no cell for its timeout " +
		"(--timeout=3600), whatever a thread of the kernel does meanwhile: a notebook idle 3 h while a " +
		"metrics thread reduces a GPU tensor every few seconds is culled, its idle time lost"
	whyPolling = "a CUDA context whose host thread polls it launches next to nothing: util reads 0 % " +
		"(one scrape in twenty at 1 %), which Job Defense Shield's zero-utilization check counts unused"
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
		"util: a job under that line is light use by it, one above it is not"
	whyPeak = "right-sizing sizes for the peak (Kubernetes' VPA recommends from a high percentile): a " +
		"job whose peak takes more than a 3g MIG slice's 3/7 of the SMs cannot move to one; one whose " +
		"peak fits, and whose mean is under Job Defense Shield's 15 % line, is light use"
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
	whyTooPowerful = "Job Defense Shield's GPU Model Too Powerful check considers jobs of 61 minutes and " +
		"more under 15 % util: a light model run for 70 minutes is light use by it, one of 50 is past its reach"
	whyMemorySlice = "a light job moves to a MIG slice only if its memory fits one: an 80 GB A100's 3g.40gb " +
		"and 4g.40gb profiles hold half its memory (NVIDIA MIG user guide), so a job holding 0.45 of it " +
		"fits, one holding 0.55 needs the whole GPU"
	whyBatchLimit = "the site limits batch jobs to 48 h (a Slurm partition's MaxTime is the operator's): " +
		"a job running past it is over its limit, one of 40 h is not"
	whySessionLimit = "the site limits interactive sessions to 24 h (Open OnDemand's and JupyterHub's " +
		"session limits are the operator's): a notebook training past it is over its limit"
)

// The cited rules' numbers. Every label of the borderline site is computed
// from its case's reading and one of these, never from gpuwatch's
// defaults: where the two differ, the case says what the source says and
// the analyzer is judged by it.
const (
	// Job Defense Shield's low-utilization check (GPU Model Too Powerful):
	// a job under 15 % util.
	jdsLowUtilPercent = 15.0
	// Job Defense Shield: cancel_minutes 120, first_warning_minutes 60.
	jdsCancelAfter  = 120 * time.Minute
	jdsFirstWarning = 60 * time.Minute
	// Northeastern's IdleBot: cancels after an hour under-utilized, first
	// mails after 15 minutes.
	idleBotCancel    = time.Hour
	idleBotFirstMail = 15 * time.Minute
	// jupyterhub-idle-culler's documented --timeout=3600.
	cullerTimeout = time.Hour
	// PyTorch's collective timeout (pytorch/pytorch#110947).
	collectiveTimeout = 30 * time.Minute
	// Job Defense Shield's GPU Model Too Powerful check considers jobs of
	// 61 minutes and more.
	jdsTooPowerfulMinRun = 61 * time.Minute
	// The site's run-time limits: interactive sessions, batch jobs.
	siteSessionLimit = 24 * time.Hour
	siteBatchLimit   = 48 * time.Hour
	// The share of an 80 GB A100's memory its 3g.40gb slice holds.
	mig3gMemory = 0.5
	// A 3g MIG slice's share of an A100's SMs.
	mig3gShare = 3.0 / 7
)

// pastRule is the label of a condition that lasted d under a rule that
// acts past limit: gh GPU-hours of p when d is past it, none within it.
func pastRule(d, limit time.Duration, p schema.Pattern, gh float64) []Label {
	if d <= limit {
		return nil
	}
	return waste(p, gh)
}

// lightUse is the label of a job of mean util over hours by Job Defense
// Shield's low-utilization line: the unused share of its hours below it,
// none at or above it.
func lightUse(util, hours float64) []Label {
	if util >= jdsLowUtilPercent {
		return nil
	}
	return waste(schema.LowUtilization, hours*(1-util/100))
}

// rightSizable is lightUse for a job whose peak takes peak of the GPU:
// light use only when the peak fits a 3g slice.
func rightSizable(util, peak, hours float64) []Label {
	if peak > mig3gShare {
		return nil
	}
	return lightUse(util, hours)
}

// tooPowerful is lightUse for a job that ran d: Job Defense Shield
// considers it only from its minimum run time.
func tooPowerful(d time.Duration, util, hours float64) []Label {
	if d < jdsTooPowerfulMinRun {
		return nil
	}
	return lightUse(util, hours)
}

// fitsSlice is lightUse for a job holding mem of the GPU's memory: light
// use only when that fits a 3g.40gb slice.
func fitsSlice(util, mem, hours float64) []Label {
	if mem > mig3gMemory {
		return nil
	}
	return lightUse(util, hours)
}

// pin says a case's reading sits at at near the threshold key.
func pin(key string, at float64) []Pin { return []Pin{{Key: key, At: at}} }

// aboveIdle is a draw of ofTDP of m's TDP as a share of the way from its
// idle draw to its TDP, the unit of idle.power_veto_above_floor.
func (m Model) aboveIdle(ofTDP float64) float64 { return (ofTDP*m.TDPW - m.IdleW) / (m.TDPW - m.IdleW) }

// pinD is pin for a duration.
func pinD(key string, d time.Duration) []Pin { return pin(key, float64(d)) }

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
// Runtime limits are the site's: interactive sessions 24 h, batch 48 h.
func Borderline() *Site {
	s := &Site{Span: 60 * time.Hour}
	for i := 0; i < 7; i++ {
		s.Nodes = append(s.Nodes, Node{Host: fmt.Sprintf("edge-a%02d", i+1), Model: A100, GPUs: 8, Interval: 15 * time.Second})
	}
	for _, cases := range []func() []Work{idleBorder, shareBorder, spinBorder, lightBorder, runBorder, durationBorder} {
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
		// idle.util_percent (3): a notebook left idle while a thread of its
		// kernel polls the GPU, beside a small model whose kernels run a
		// little more often; a probe further up is light use as well.
		{Case: "notebook idle 3 h while a thread polls the GPU, util 2.4 %", Node: "edge-a07", GPUs: []int{6}, Holder: pod("lab", "jupyter-hana"), Start: 1 * h, End: 6 * h,
			Shape: then(Training(90), 2*h, steady(signals{util: 2.4, sm: 0.008, dram: 0.001, fbMiB: 9 * 1024, above: 0.02})),
			Waste: pastRule(3*h, cullerTimeout, schema.IdleSession, 3), Why: whyCullerThread, Pins: pin("idle.util_percent", 2.4)},
		{Case: "small model at util 3.6 %", Node: "edge-a01", GPUs: []int{1}, Holder: slurm("81002"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 3.6, sm: 0.03, dram: 0.005, memCopy: 0.5, fbMiB: 900, above: 0.03}),
			Waste: lightUse(3.6, 8), Why: whyAboveZero, Pins: pin("idle.util_percent", 3.6)},
		{Case: "CPU job probing its GPU, util 4.5 %", Node: "edge-a01", GPUs: []int{0}, Holder: slurm("81001"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 4.5, sm: 0.004, dram: 0.002, memCopy: 0.3, fbMiB: 610, above: 0.02}),
			Waste: lightUse(4.5, 6), Why: whyProbe},
		// idle.sm_active (0.01).
		{Case: "CUDA context with a polling thread, SM activity 0.0087", Node: "edge-a01", GPUs: []int{2}, Holder: slurm("81003"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.0087, dram: 0.001, fbMiB: 500, above: 0.015}),
			Waste: waste(schema.CPUOnly, 6), Also: light, Why: whyPolling, Pins: pin("idle.sm_active", 0.0087)},
		{Case: "sparse kernels on a few SMs, util 1.8 %, SM activity 0.011", Node: "edge-a01", GPUs: []int{3}, Holder: slurm("81004"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 1.8, sm: 0.011, dram: 0.006, memCopy: 1, fbMiB: 900, above: 0.03}),
			Waste: lightUse(1.8, 6), Why: whyAboveZero, Profiling: true, Pins: pin("idle.sm_active", 0.011)},
		// idle.power_veto_above_floor (0.3 of the way from the model's idle
		// floor to its limit): pinned against the board's bare idle draw,
		// a few watts under the floor the analyzer learns from the site's
		// idle holders, so a pin reads a little above where it is judged.
		{Case: "CPU job on a GPU with locked clocks, 0.35 of TDP", Node: "edge-a01", GPUs: []int{4}, Holder: slurm("81005"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.002, dram: 0.001, fbMiB: 520, ofTDP: 0.35}),
			Waste: waste(schema.CPUOnly, 6), Also: light, Why: whyLockedClocks, Pins: pin("idle.power_veto_above_floor", A100.aboveIdle(0.35))},
		{Case: "training, then 90 minutes decoding on the hardware decoders at 0.45 of TDP", Node: "edge-a01", GPUs: []int{5}, Holder: slurm("81006"),
			Start: 1 * h, End: 4*h + 30*m,
			Shape: then(Training(95), 2*h, steady(signals{util: 2, sm: 0.004, dram: 0.03, memCopy: 2, fbMiB: 6 * 1024, ofTDP: 0.45})),
			Why:   whyDecoder, Pins: pin("idle.power_veto_above_floor", A100.aboveIdle(0.45))},
		// idle.memory_held_mib (1024).
		{Case: "CPU job with a cuDNN workspace, 900 MiB", Node: "edge-a01", GPUs: []int{6}, Holder: slurm("81007"), Start: 1 * h, End: 7 * h,
			Shape: steady(signals{util: 0.05, sm: 0.001, fbMiB: 900, above: 0.015}),
			Waste: waste(schema.CPUOnly, 6), Why: whyZeroUtil, Pins: pin("idle.memory_held_mib", 900)},
		{Case: "small LSTM deadlocked after 2 h, holding 1.15 GiB", Node: "edge-a01", GPUs: []int{7}, Holder: slurm("81008"), Start: 1 * h, End: 6 * h,
			Shape: then(steady(signals{util: 60, sm: 0.4, dram: 0.2, memCopy: 18, fbMiB: 1150, above: 0.4}), 2*h,
				steady(signals{util: 0.05, fbMiB: 1150, above: 0.02})),
			Waste: waste(schema.Stuck, 3), Why: "a deadlocked job holds its GPU with nothing running: " + whyHung, Pins: pin("idle.memory_held_mib", 1150)},
	}
}

// shareBorder: the share of steps that makes a GPU of a job unused.
func shareBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// over_requested.max_active_ratio (0.05 of the steps).
		{Case: "2 GPUs, the second runs only probes (6 of 144 steps)", Node: "edge-a02", GPUs: []int{0, 1}, Holder: slurm("81009"), Start: 1 * h, End: 13 * h,
			Shape: ranks(Training(95), every(steady(bare), 2*h, time.Minute, time.Minute, steady(signals{util: 40, sm: 0.3, dram: 0.1, fbMiB: 480, above: 0.2}))),
			Waste: waste(schema.OverRequested, 12), Why: whyProbeRank, Pins: pin("patterns.over_requested.max_active_ratio", 6.0/144)},
		{Case: "2 GPUs, the second evaluates 8 times in 12 h", Node: "edge-a02", GPUs: []int{2, 3}, Holder: slurm("81010"), Start: 1 * h, End: 13 * h,
			Shape: ranks(Training(95), every(steady(signals{fbMiB: 2048, above: 0.015}), 90*m, time.Minute, 3*m, steady(signals{util: 85, sm: 0.7, dram: 0.4, memCopy: 25, fbMiB: 2048, above: 0.6}))),
			Why:   whyEvalRank, Pins: pin("patterns.over_requested.max_active_ratio", 8.0/144)},
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
			Also:  light, Why: whyLaunchBound, Pins: pin("patterns.stuck.spin_util_percent", 78)},
		// stuck.spin_power_ratio (0.25 of the way from the model's idle floor to its limit).
		{Case: "hung collective drawing 0.215 above idle", Node: "edge-a02", GPUs: []int{5, 6}, Holder: slurm("81012"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.215)), Waste: waste(schema.Stuck, 2*5), Why: whyHung,
			Pins: append(pin("patterns.stuck.spin_power_ratio", 0.215), pin("patterns.stuck.spin_util_percent", 100)...)},
		{Case: "serial kernel at 0.28 above idle", Node: "edge-a02", GPUs: []int{7}, Holder: slurm("81013"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.01, 2, 0.28)), Also: light, Why: whySerial, Pins: pin("patterns.stuck.spin_power_ratio", 0.28)},
		// stuck.spin_mem_copy_percent (5).
		{Case: "hung collective polling a flag, memory-copy util 4.4 %", Node: "edge-a03", GPUs: []int{0, 1}, Holder: slurm("81014"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.01, 4.4, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung, Pins: pin("patterns.stuck.spin_mem_copy_percent", 4.4)},
		{Case: "serial kernel streaming a small buffer, memory-copy util 5.6 %", Node: "edge-a03", GPUs: []int{2}, Holder: slurm("81015"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.04, 5.6, 0.15)), Also: light, Why: whySerial, Pins: pin("patterns.stuck.spin_mem_copy_percent", 5.6)},
		// stuck.spin_sm_active (0.3): a hang keeps one block per NCCL
		// channel resident, 32 channels of an A100's 108 SMs reading 0.28
		// (NVIDIA/nccl#689); a persistent kernel on a third of the SMs
		// computes.
		{Case: "hung collective, 32 channel blocks resident, SM activity 0.28", Node: "edge-a03", GPUs: []int{3, 4}, Holder: slurm("81016"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.28, 0.005, 1, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung, Pins: pin("patterns.stuck.spin_sm_active", 0.28)},
		{Case: "persistent kernel, SM activity 0.33", Node: "edge-a03", GPUs: []int{5}, Holder: slurm("81017"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.33, 0.01, 1, 0.12)), Also: light, Why: whySerial, Profiling: true, Pins: pin("patterns.stuck.spin_sm_active", 0.33)},
		// stuck.spin_dram_active (0.05).
		{Case: "hung collective, DRAM activity 0.045", Node: "edge-a03", GPUs: []int{6, 7}, Holder: slurm("81018"), Start: 1 * h, End: 8 * h,
			Shape: hangAfter(2*h, spin(0.02, 0.045, 3, 0.12)), Waste: waste(schema.Stuck, 2*5), Why: whyHung, Pins: pin("patterns.stuck.spin_dram_active", 0.045)},
		{Case: "serial kernel, DRAM activity 0.056", Node: "edge-a04", GPUs: []int{0}, Holder: slurm("81019"), Start: 1 * h, End: 7 * h,
			Shape: steady(serial(0.01, 0.056, 3, 0.12)), Also: light, Why: whySerial, Profiling: true, Pins: pin("patterns.stuck.spin_dram_active", 0.056)},
	}
}

// lightBorder: light use and the site's session limit.
func lightBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// low_utilization.max_mean_util_percent (15) and max_mean_sm_active
		// (0.1): a light model under Job Defense Shield's 15 % line beside
		// one above it, their kernels keeping about two thirds of the SMs
		// busy while they run.
		{Case: "light model at util 13 %", Node: "edge-a04", GPUs: []int{2}, Holder: slurm("81021"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 13, sm: 0.09, dram: 0.07, memCopy: 5, fbMiB: 6 * 1024, above: 0.1}),
			Waste: lightUse(13, 8), Why: whyModerate,
			Pins: append(pin("patterns.low_utilization.max_mean_util_percent", 13), pin("patterns.low_utilization.max_mean_sm_active", 0.09)...)},
		{Case: "light model at util 17.5 %", Node: "edge-a04", GPUs: []int{1}, Holder: slurm("81020"), Start: 1 * h, End: 9 * h,
			Shape: steady(signals{util: 17.5, sm: 0.12, dram: 0.08, memCopy: 6, fbMiB: 6 * 1024, above: 0.12}),
			Waste: lightUse(17.5, 8), Why: whyModerate,
			Pins: append(pin("patterns.low_utilization.max_mean_util_percent", 17.5), pin("patterns.low_utilization.max_mean_sm_active", 0.12)...)},
		// low_utilization.max_peak_ratio (0.4).
		{Case: "light job with a 40-minute phase at 36 %", Node: "edge-a04", GPUs: []int{3}, Holder: slurm("81022"), Start: 1 * h, End: 9 * h,
			Shape: every(steady(signals{util: 8, sm: 0.07, dram: 0.04, memCopy: 3, fbMiB: 6 * 1024, above: 0.08}), 8*h, 4*h, 40*m,
				steady(signals{util: 36, sm: 0.35, dram: 0.15, memCopy: 10, fbMiB: 6 * 1024, above: 0.25})),
			Waste: rightSizable((8*22+36*2)/24.0, 0.36, 8), Why: whyPeak, Pins: pin("patterns.low_utilization.max_peak_ratio", 0.36)},
		{Case: "service whose daily peak takes 45 % for 40 minutes", Node: "edge-a04", GPUs: []int{4}, Holder: pod("serving", "recs-6c8d9f7b5d-k4w2z"), Start: 1 * h, End: 9 * h,
			Shape: every(steady(signals{util: 8, sm: 0.07, dram: 0.04, memCopy: 3, fbMiB: 6 * 1024, above: 0.08}), 8*h, 4*h, 40*m,
				steady(signals{util: 45, sm: 0.44, dram: 0.2, memCopy: 12, fbMiB: 6 * 1024, above: 0.3})),
			Waste: rightSizable((8*22+45*2)/24.0, 0.45, 8), Why: whyPeak, Pins: pin("patterns.low_utilization.max_peak_ratio", 0.45)},
		// overlong.max_runtime.interactive (the site's 24 h).
		{Case: "notebook training for 21 h", Node: "edge-a04", GPUs: []int{5}, Holder: pod("lab", "jupyter-dana"), Start: 1 * h, End: 22 * h,
			Shape: Training(90), Waste: pastRule(21*h, siteSessionLimit, schema.Overlong, 0), Why: whySessionLimit,
			Pins: pinD("patterns.overlong.max_runtime.interactive", 21*h)},
		{Case: "notebook training for 27 h", Node: "edge-a04", GPUs: []int{6}, Holder: pod("lab", "jupyter-erin"), Start: 1 * h, End: 28 * h,
			Shape: Training(90), Waste: pastRule(27*h, siteSessionLimit, schema.Overlong, 0), Why: whySessionLimit,
			Pins: pinD("patterns.overlong.max_runtime.interactive", 27*h)},
	}
}

// lightModel is a small model's steady reading at util % holding mem of
// an A100's memory.
func lightModel(util, mem float64) signals {
	return signals{util: util, sm: util / 125, dram: util / 200, memCopy: util / 2.5, fbMiB: mem * A100.MemoryMiB, above: 0.08}
}

// runBorder: how long light use must run, how much memory it may hold,
// and the site's batch limit.
func runBorder() []Work {
	h, m := time.Hour, time.Minute
	return []Work{
		// patterns.low_utilization.min_duration (1h).
		{Case: "light model at util 10 % for 50 minutes", Node: "edge-a07", GPUs: []int{0}, Holder: slurm("81033"), Start: 1 * h, End: 1*h + 50*m,
			Shape: steady(lightModel(10, 0.08)), Waste: tooPowerful(50*m, 10, 50.0/60), Why: whyTooPowerful,
			Pins: pinD("patterns.low_utilization.min_duration", 50*m)},
		{Case: "light model at util 10 % for 70 minutes", Node: "edge-a07", GPUs: []int{1}, Holder: slurm("81034"), Start: 1 * h, End: 2*h + 10*m,
			Shape: steady(lightModel(10, 0.08)), Waste: tooPowerful(70*m, 10, 70.0/60), Why: whyTooPowerful,
			Pins: pinD("patterns.low_utilization.min_duration", 70*m)},
		// patterns.low_utilization.max_memory_ratio (0.5).
		{Case: "light model holding 0.45 of the GPU's memory", Node: "edge-a07", GPUs: []int{2}, Holder: slurm("81035"), Start: 1 * h, End: 9 * h,
			Shape: steady(lightModel(10, 0.45)), Waste: fitsSlice(10, 0.45, 8), Why: whyMemorySlice,
			Pins: pin("patterns.low_utilization.max_memory_ratio", 0.45)},
		{Case: "light model holding 0.55 of the GPU's memory", Node: "edge-a07", GPUs: []int{3}, Holder: slurm("81036"), Start: 1 * h, End: 9 * h,
			Shape: steady(lightModel(10, 0.55)), Waste: fitsSlice(10, 0.55, 8), Why: whyMemorySlice,
			Pins: pin("patterns.low_utilization.max_memory_ratio", 0.55)},
		// patterns.overlong.max_runtime.batch (the site's 48 h).
		{Case: "batch training for 40 h", Node: "edge-a07", GPUs: []int{4}, Holder: slurm("81037"), Start: 1 * h, End: 41 * h,
			Shape: Training(95), Waste: pastRule(40*h, siteBatchLimit, schema.Overlong, 0), Why: whyBatchLimit,
			Pins: pinD("patterns.overlong.max_runtime.batch", 40*h)},
		{Case: "batch training for 56 h", Node: "edge-a07", GPUs: []int{5}, Holder: slurm("81038"), Start: 1 * h, End: 57 * h,
			Shape: Training(95), Waste: pastRule(56*h, siteBatchLimit, schema.Overlong, 0), Why: whyBatchLimit,
			Pins: pinD("patterns.overlong.max_runtime.batch", 56*h)},
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
			Shape: CPUFallback(), Waste: pastRule(105*m, jdsCancelAfter, schema.CPUOnly, 105.0/60), Why: whyCancelRule,
			Pins: pinD("patterns.cpu_only.min_duration", 105*m)},
		{Case: "CPU job of 2 h 20 m", Node: "edge-a05", GPUs: []int{0}, Holder: slurm("81024"), Start: 1 * h, End: 3*h + 20*m,
			Shape: CPUFallback(), Waste: pastRule(140*m, jdsCancelAfter, schema.CPUOnly, 140.0/60), Why: whyCancelRule,
			Pins: pinD("patterns.cpu_only.min_duration", 140*m)},
		// patterns.over_requested.min_duration (1h).
		{Case: "2 GPUs computing on one, 50 minutes", Node: "edge-a05", GPUs: []int{1, 2}, Holder: slurm("81025"), Start: 1 * h, End: 1*h + 50*m,
			Shape: Partial(), Waste: pastRule(50*m, jdsFirstWarning, schema.OverRequested, 50.0/60), Why: whyFirstWarning,
			Pins: pinD("patterns.over_requested.min_duration", 50*m)},
		{Case: "2 GPUs computing on one, 70 minutes", Node: "edge-a05", GPUs: []int{3, 4}, Holder: slurm("81026"), Start: 1 * h, End: 2*h + 10*m,
			Shape: Partial(), Waste: pastRule(70*m, jdsFirstWarning, schema.OverRequested, 70.0/60), Why: whyFirstWarning,
			Pins: pinD("patterns.over_requested.min_duration", 70*m)},
		// patterns.stuck.idle_duration (1h).
		{Case: "training, then a 50-minute checkpoint write to slow storage", Node: "edge-a05", GPUs: []int{5}, Holder: slurm("81027"), Start: 1 * h, End: 3*h + 50*m,
			Shape: then(Training(95), 2*h, held), Waste: pastRule(50*m, idleBotCancel, schema.Stuck, 50.0/60), Why: whyCheckpoint,
			Pins: pinD("patterns.stuck.idle_duration", 50*m)},
		{Case: "training, then deadlocked 70 minutes until killed", Node: "edge-a05", GPUs: []int{6}, Holder: slurm("81028"), Start: 1 * h, End: 4*h + 10*m,
			Shape: then(Training(95), 2*h, held), Waste: pastRule(70*m, idleBotCancel, schema.Stuck, 70.0/60), Why: whyDeadlock,
			Pins: pinD("patterns.stuck.idle_duration", 70*m)},
		// patterns.stuck.spin_duration (30m).
		{Case: "collective waiting 25 minutes for a slow rank, then training on", Node: "edge-a06", GPUs: []int{0, 1}, Holder: slurm("81029"), Start: 1 * h, End: 5*h + 25*m,
			Shape: then(hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.1)), 2*h+25*m, Training(96)), Waste: pastRule(25*m, collectiveTimeout, schema.Stuck, 2*25.0/60),
			Why: whySlowRank, Pins: pinD("patterns.stuck.spin_duration", 25*m)},
		{Case: "hung collective killed after 35 minutes", Node: "edge-a06", GPUs: []int{2, 3}, Holder: slurm("81030"), Start: 1 * h, End: 3*h + 35*m,
			Shape: hangAfter(2*h, spin(0.02, 0.003, 0.3, 0.1)), Waste: pastRule(35*m, collectiveTimeout, schema.Stuck, 2*35.0/60), Why: whySlowRank,
			Pins: pinD("patterns.stuck.spin_duration", 35*m)},
		// patterns.startup_overhead.min_delay (15m).
		{Case: "12 minutes staging before the first kernel", Node: "edge-a06", GPUs: []int{4}, Holder: slurm("81031"), Start: 1 * h, End: 5 * h,
			Shape: SlowStart(12 * m), Waste: pastRule(12*m, idleBotFirstMail, schema.StartupOverhead, 12.0/60), Why: whyStaging,
			Pins: pinD("patterns.startup_overhead.min_delay", 12*m)},
		{Case: "18 minutes staging before the first kernel", Node: "edge-a06", GPUs: []int{5}, Holder: slurm("81032"), Start: 1 * h, End: 5 * h,
			Shape: SlowStart(18 * m), Waste: pastRule(18*m, idleBotFirstMail, schema.StartupOverhead, 18.0/60), Why: whyStaging,
			Pins: pinD("patterns.startup_overhead.min_delay", 18*m)},
		// patterns.idle_session.min_duration (1h).
		{Case: "notebook idle 50 minutes after 3 h of training, then stopped", Node: "edge-a06", GPUs: []int{6}, Holder: pod("lab", "jupyter-fay"), Start: 1 * h, End: 4*h + 50*m,
			Shape: notebookIdle(3 * h), Waste: pastRule(50*m, cullerTimeout, schema.IdleSession, 50.0/60), Why: whyCuller,
			Pins: pinD("patterns.idle_session.min_duration", 50*m)},
		{Case: "notebook idle 70 minutes after 3 h of training, then culled", Node: "edge-a06", GPUs: []int{7}, Holder: pod("lab", "jupyter-gus"), Start: 1 * h, End: 5*h + 10*m,
			Shape: notebookIdle(3 * h), Waste: pastRule(70*m, cullerTimeout, schema.IdleSession, 70.0/60), Why: whyCuller,
			Pins: pinD("patterns.idle_session.min_duration", 70*m)},
	}
}
