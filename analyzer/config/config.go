// Package config holds the analyzer's thresholds: what counts as idle, and
// when each waste pattern fires. Every default is documented with the
// practice it comes from; a YAML file (--config) overrides any of them,
// pattern by pattern. Parsing is strict: unknown keys and out-of-range values
// are errors that name the file and line.
package config

import (
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// Config is the analyzer configuration.
type Config struct {
	// Step is the analysis interval: features are aggregated per GPU over
	// each step, and the daemon's cycle reads one step. Default 5m.
	Step Duration `yaml:"step"`
	// MinCoverage is the fraction of a step's expected samples a GPU must
	// have for the step to count as known. Below it the step is unknown:
	// missing data is never idleness. Default 0.5. The expected count is
	// each GPU's own (its usual count per step, learnt from its samples),
	// so no scrape interval needs setting and mixed intervals need none.
	MinCoverage Ratio `yaml:"min_coverage"`
	Idle        Idle  `yaml:"idle"`
	// Patterns holds one section per finding pattern.
	Patterns Patterns `yaml:"patterns"`
}

// Idle says when a GPU does nothing during one step.
type Idle struct {
	// UtilPercent: the step is idle only if its mean GPU util is at most
	// this. Default 3 (%). Jobstats and Princeton's Job Defense Shield call
	// a GPU unused only at 0 % (its documentation, "Automatically Cancel
	// GPU Jobs at 0% Utilization"), Run:ai when a whole 30 s interval reads
	// 0 (Run:ai scheduling rules, "Idle GPU time limit"): kernels that run
	// a few percent of the time are use, light use by Job Defense Shield's
	// 15 % line, and a job of them is never CPU-only. But util is a whole
	// percentage of the sample period in which any kernel ran, and a GPU
	// holding a context reads 1-2 % now and then (driver housekeeping, a
	// monitoring probe); the simulator's corpus draws 0-2 % at every sample
	// of an idle board, a bound no step mean passes. 3 keeps such a board
	// idle with room, and calls use a steady few percent.
	UtilPercent Percent `yaml:"util_percent"`
	// SMActive: with DCGM_FI_PROF_SM_ACTIVE present, the step is idle only if
	// its mean SM activity is below this (graphics-engine activity on MIG
	// instances, which have no util). Default 0.01: one SM in a hundred
	// holding a warp; the DCGM user guide ("Profiling Metrics") reads SM
	// activity under 0.5 as likely ineffective use, so 0.01 is no use.
	SMActive Ratio `yaml:"sm_active"`
	// PowerVetoAboveFloor: a GPU whose mean draw sits more than this share
	// of the way from its model's idle floor (0) to its power limit (1) is
	// never idle, whatever util says. The floor is learnt from the fleet
	// (FloorQuantile, FloorMinSamples), else the model's published idle
	// figure (analyzer/gpumodel); the limit is DCGM_FI_DEV_POWER_MGMT_LIMIT,
	// else the model's TDP. Default 0.3: it keeps the line where a fixed 0.4
	// of TDP put it on the parts that share was set on (idle A100 SXM near
	// 55 W of 400 W: (160-55)/(400-55) = 0.30; idle H100 SXM near 70 W of
	// 700 W: 0.33), while MLPerf Training power results show busy boards at
	// 0.7-0.95 of TDP. A share of TDP failed on inference parts whose idle
	// draw with contexts is itself near half their TDP (an L4 at about 35 W
	// of 72 W). Ignored when power is not exported. Replaces
	// power_veto_ratio (a share of the limit for every part), which is
	// refused with a pointer here.
	PowerVetoAboveFloor Ratio `yaml:"power_veto_above_floor"`
	// FloorQuantile: a model's idle floor is this quantile of the mean draws
	// of its whole GPUs in steps where they hold a context (framebuffer in
	// use) and do nothing: mean util at most 2 % (housekeeping's blips), SM
	// activity below sm_active and memory-copy util at most 1 %, where
	// exported. Default 0.5, the median: it is the draw the model's
	// boards typically hold, and the margins judged above it (the veto's
	// 0.3 of the range, the spin's 0.25) cover the spread between boards
	// (up to 10 % of idle draw). A high quantile let a few idle boards with
	// locked clocks (0.35 of TDP, doing nothing) lift the whole model's
	// floor until hardware-decoder work at 0.45 of TDP read idle and a
	// serial kernel read as a hang.
	FloorQuantile Ratio `yaml:"floor_quantile"`
	// FloorMinSamples: the idle steps a model needs before its learnt floor
	// replaces the published figure. Default 36: three GPU-hours of
	// 5-minute steps, enough for the quantile to rest on more than one
	// board's quiet spell.
	FloorMinSamples int `yaml:"floor_min_samples"`
	// MemoryHeldMiB: framebuffer use above this means a process holds the
	// GPU. Default 1024: nvidia-smi shows a bare CUDA context at a few
	// hundred MiB per process, and any loaded model holds more.
	MemoryHeldMiB float64 `yaml:"memory_held_mib"`
}

// Patterns configures each detector.
type Patterns struct {
	CPUOnly         CPUOnly         `yaml:"cpu_only"`
	OverRequested   OverRequested   `yaml:"over_requested"`
	Stuck           Stuck           `yaml:"stuck"`
	StartupOverhead StartupOverhead `yaml:"startup_overhead"`
	IdleSession     IdleSession     `yaml:"idle_session"`
	LowUtilization  LowUtilization  `yaml:"low_utilization"`
	Overlong        Overlong        `yaml:"overlong"`
	OrphanProcess   OrphanProcess   `yaml:"orphan_process"`
}

// Switch turns a detector off; detectors are on unless disabled.
type Switch struct {
	Disabled bool `yaml:"disabled"`
}

// CPUOnly: a job of any kind whose GPUs have been idle since it started;
// the kind decides the recommended action (a service is advised, not
// reclaimed), not whether it is found.
type CPUOnly struct {
	Switch `yaml:",inline"`
	// MinDuration of idleness since the start. Default 2h: Princeton's Job
	// Defense Shield cancels jobs whose GPUs stayed at 0% for 120 minutes
	// (cancel_minutes: 120 in its "Automatically Cancel GPU Jobs" alert).
	MinDuration Duration `yaml:"min_duration"`
}

// OverRequested: a multi-GPU job leaving some of its GPUs idle.
type OverRequested struct {
	Switch `yaml:",inline"`
	// MinDuration the job must have run with at least one GPU idle all along
	// and at least one working. Default 1h: Job Defense Shield's first
	// warning on GPUs at 0 % (first_warning_minutes: 60), which covers jobs
	// leaving some of their GPUs unused (gpu_frac_threshold); Northeastern's
	// IdleBot cancels after an hour under-utilized.
	MinDuration Duration `yaml:"min_duration"`
	// MaxActiveRatio: a GPU counts as unused when it was active in at most
	// this fraction of the job's known steps. Default 0.05: Job Defense
	// Shield counts a GPU unused only at 0 % throughout; one step in twenty
	// lets a launcher's probe or a stray warm-up kernel through.
	MaxActiveRatio Ratio `yaml:"max_active_ratio"`
}

// Stuck: a job that worked, then stopped making progress while holding its GPUs.
type Stuck struct {
	Switch `yaml:",inline"`
	// IdleDuration: every GPU idle with memory held, after activity. Default
	// 1h: Northeastern's IdleBot (rc-docs.northeastern.edu, "IdleBot") cancels
	// jobs under-utilized for an hour, and jupyterhub-idle-culler's
	// documented setup culls after --timeout=3600; bursty training stalls
	// (data loading, checkpoints, evaluation) last minutes.
	IdleDuration Duration `yaml:"idle_duration"`
	// SpinDuration: the spin-waiting collective signature held continuously.
	// Default 30m: PyTorch's collective timeout was 30 minutes until it cut
	// NCCL's to 10 (pytorch/pytorch#110947: "collectives should time out
	// within seconds"), so a rank still spinning after 30 has no watchdog.
	SpinDuration Duration `yaml:"spin_duration"`
	// SpinUtilPercent: minimum mean GPU util over the step. Default 90: util
	// is the share of time any kernel was resident (NVML's
	// nvmlUtilization_t), so a kernel that never returns reads 100 on every
	// sample; 90 leaves room for the sampling of a 60 s scrape.
	SpinUtilPercent Percent `yaml:"spin_util_percent"`
	// SpinPowerRatio: mean power at most this far from the GPU model's idle
	// floor towards its power limit (0 = floor, 1 = limit). The floor is
	// learnt from the fleet's idle steps (idle.floor_quantile), else the
	// model's published idle figure; the limit is
	// DCGM_FI_DEV_POWER_MGMT_LIMIT, or the model's TDP where the data has
	// none (dcgm-exporter's default counters). Default 0.25: MLPerf
	// Training power submissions show busy A100/H100 boards at 70-95% of
	// TDP, and a resident polling kernel keeps a board near its idle P0
	// draw (an A100 at about 60-90 W of 400 W).
	SpinPowerRatio Ratio `yaml:"spin_power_ratio"`
	// SpinMemCopyPercent: with DCGM_FI_DEV_MEM_COPY_UTIL present, its mean
	// must be at most this. Default 5: a spin-wait polls one flag while any
	// training or inference step streams weights and activations.
	SpinMemCopyPercent Percent `yaml:"spin_mem_copy_percent"`
	// SpinSMActive: with DCGM_FI_PROF_SM_ACTIVE present, the signature
	// needs SM activity at most this. Default 0.3: a hung collective keeps
	// its channel blocks resident. NCCL launches one CUDA block per channel
	// and a block takes an SM of its own (NVIDIA/nccl#689: about 2 SMs on a
	// PCIe system with one NIC, 16 on a DGX with 8 NICs; "NCCL CTAs won't
	// share an SM with compute kernels"), and a block waiting on its peers
	// spins in its wait loop (NVIDIA/nccl#558: cuda-gdb puts every thread
	// of a hung all-reduce in prims_ll.h's polling lines), so each of those
	// SMs reads active all the time. SM activity is then the channels'
	// share of the SMs: 16-32 of an H100's 132, 0.12-0.24; 32 of an A100's
	// 108, 0.30. A waiting block does no matrix or memory work, so tensor
	// and DRAM activity stay near 0, which is what tells it from
	// small-batch inference (SM activity in the same low tenths, DRAM and
	// tensor activity clearly above 0).
	SpinSMActive Ratio `yaml:"spin_sm_active"`
	// SpinDRAMActive: with DCGM_FI_PROF_DRAM_ACTIVE present, at most this;
	// tensor-pipe activity, where exported, at most this too (it can only
	// veto: a GPU without tensor cores reads 0 whatever it does). Default
	// 0.05: a spinning block polls a flag and does no matrix math, while
	// any real kernel, small-batch decoding above all, streams weights
	// (DRAM activity well above 0.1) through matrix multiplies.
	SpinDRAMActive Ratio `yaml:"spin_dram_active"`
}

// StartupOverhead: a job that held its GPUs long before first using them.
type StartupOverhead struct {
	Switch `yaml:",inline"`
	// MinDelay from allocation to first GPU activity. Default 15m:
	// Northeastern's IdleBot first mails a user after 15 minutes
	// under-utilized, and Job Defense Shield samples every 15 minutes
	// (sampling_period_minutes: 15); image pulls and data staging of a few
	// minutes are normal.
	MinDelay Duration `yaml:"min_delay"`
}

// IdleSession: an interactive session left idle.
type IdleSession struct {
	Switch `yaml:",inline"`
	// MinDuration of continuous idleness. Default 1h: jupyterhub-idle-culler's
	// documented service setup (--timeout=3600) and Northeastern's IdleBot.
	MinDuration Duration `yaml:"min_duration"`
}

// LowUtilization: a whole GPU used lightly all along.
type LowUtilization struct {
	Switch `yaml:",inline"`
	// MinDuration of known data. Default 1h, so short jobs are left alone:
	// Job Defense Shield's gpu_model_too_powerful considers jobs of 61
	// minutes and more, and a light run of 70 minutes is light use by it
	// as much as one of a day (a line of 2h left such runs unnamed).
	MinDuration Duration `yaml:"min_duration"`
	// MaxMeanUtilPercent: mean GPU util below this (used without profiling
	// metrics). Default 15: Job Defense Shield's gpu_util_threshold, the
	// line under which its GPU Model Too Powerful alert says a smaller GPU
	// or a MIG slice would do. A job at 17 % is not light use by it, and a
	// finding the field's own rule would not make is one users dispute.
	// OpenPAI's low-utilization plugin takes 20 % over five days
	// (microsoft/pai#4266): a site that wants its line sets 20.
	MaxMeanUtilPercent Percent `yaml:"max_mean_util_percent"`
	// MaxMeanSMActive: mean SM activity below this (preferred when
	// DCGM_FI_PROF_SM_ACTIVE exists: util counts a GPU busy if any kernel is
	// resident, SM activity counts the SMs doing it). Default 0.10: the util
	// line's 15 % read in SM activity for a light model whose kernels keep
	// about two thirds of the SMs busy while they run, so that a job the
	// util line leaves alone is left alone here too. SM activity reads
	// below util for the same work, never above; a site whose light jobs
	// fill the GPU while they run sets up to 0.15.
	MaxMeanSMActive Ratio `yaml:"max_mean_sm_active"`
	// MaxPeakRatio: no step may average more than this ratio (util/100 or
	// SM activity): a daily-cycle inference service that peaks high needs
	// the whole GPU at its peak. Default 0.4: the largest A100/H100 MIG
	// slice short of the whole GPU is 4g (4/7 ≈ 0.57 of the SMs, NVIDIA MIG
	// user guide); peaks under 0.4 leave that slice headroom.
	MaxPeakRatio Ratio `yaml:"max_peak_ratio"`
	// MaxMemoryRatio: peak framebuffer use at most this fraction of the
	// GPU's memory, so the job fits a MIG slice or a smaller GPU. Default
	// 0.5: the 3g/4g MIG profiles hold half the memory (3g.40gb, 4g.40gb on
	// an 80 GB A100, NVIDIA MIG user guide).
	MaxMemoryRatio Ratio `yaml:"max_memory_ratio"`
}

// Overlong: a job running past its run-time limit: the time limit its
// scheduler reports (Slurm's, read with squeue by the analyzer daemon),
// else its kind's maximum here.
type Overlong struct {
	Switch `yaml:",inline"`
	// MaxRuntime per kind (batch, interactive, service), for jobs whose
	// scheduler reports no limit. None by default: a limit is its owner's
	// (the scheduler's, or the site's tiers), and a site without one has
	// notebooks and StatefulSets that rightly run for days; a built-in
	// limit would call them overlong. A site whose tiers have limits sets
	// them here, e.g. batch 48h for a training partition's.
	MaxRuntime map[string]Duration `yaml:"max_runtime"`
}

// OrphanProcess: GPU memory held by a process of no live job.
type OrphanProcess struct {
	Switch `yaml:",inline"`
	// MinDuration the process must stay orphaned. Default 10m: longer than a
	// Slurm epilog's cleanup and than its default UnkillableStepTimeout
	// (60 s, slurm.conf), after which Slurm itself gives up on the process.
	MinDuration Duration `yaml:"min_duration"`
}

// Default returns the documented defaults.
func Default() Config {
	return Config{
		Step:        Duration(5 * time.Minute),
		MinCoverage: 0.5,
		Idle: Idle{
			UtilPercent:         3,
			SMActive:            0.01,
			MemoryHeldMiB:       1024,
			PowerVetoAboveFloor: 0.3,
			FloorQuantile:       0.5,
			FloorMinSamples:     36,
		},
		Patterns: Patterns{
			CPUOnly:       CPUOnly{MinDuration: Duration(2 * time.Hour)},
			OverRequested: OverRequested{MinDuration: Duration(time.Hour), MaxActiveRatio: 0.05},
			Stuck: Stuck{IdleDuration: Duration(time.Hour), SpinDuration: Duration(30 * time.Minute),
				SpinUtilPercent: 90, SpinPowerRatio: 0.25, SpinMemCopyPercent: 5, SpinSMActive: 0.3, SpinDRAMActive: 0.05},
			StartupOverhead: StartupOverhead{MinDelay: Duration(15 * time.Minute)},
			IdleSession:     IdleSession{MinDuration: Duration(time.Hour)},
			LowUtilization: LowUtilization{MinDuration: Duration(time.Hour), MaxMeanUtilPercent: 15,
				MaxMeanSMActive: 0.1, MaxPeakRatio: 0.4, MaxMemoryRatio: 0.5},
			Overlong:      Overlong{MaxRuntime: map[string]Duration{}},
			OrphanProcess: OrphanProcess{MinDuration: Duration(10 * time.Minute)},
		},
	}
}

// Load reads a config file over the defaults (internal/configfile: bounded
// read, one document, known keys, no NaN, every error with file:line: key).
func Load(path string) (Config, error) {
	data, err := configfile.ReadFile(path)
	if err != nil {
		return Config{}, configfile.Errors{{File: path, Msg: err.Error()}}
	}
	return Parse(path, data)
}

// Parse parses YAML over the defaults; name labels errors. Keys left out keep
// their defaults; max_runtime entries are merged per kind.
func Parse(name string, data []byte) (Config, error) {
	c := Default()
	doc, err := configfile.Decode(name, data, &c)
	if err != nil {
		return Config{}, explainRetired(err)
	}
	if c.Patterns.Overlong.MaxRuntime == nil {
		c.Patterns.Overlong.MaxRuntime = map[string]Duration{}
	}
	if errs := c.check(doc); len(errs) > 0 {
		return Config{}, errs.Err()
	}
	return c, nil
}

// retired maps a key path gpuwatch no longer reads to why, and what to
// write instead: a key whose meaning changed is refused, never read under
// its new meaning.
var retired = map[string]string{
	"idle.power_veto_ratio": "retired: power is no longer judged as one share of the power limit for every part " +
		"(an idle L4 holding contexts draws 0.49 of its TDP); set idle.power_veto_above_floor, the share of the way " +
		"from the model's idle floor to its limit (default 0.3), or remove the key",
}

// explainRetired turns "unknown key" errors on retired keys into what
// replaced them.
func explainRetired(err error) error {
	var es configfile.Errors
	if !errors.As(err, &es) {
		return err
	}
	for _, e := range es {
		if why, ok := retired[e.Path]; ok && strings.HasPrefix(e.Msg, "unknown key") {
			e.Msg = why
		}
	}
	return es
}

// check holds the cross-field rules that a single value cannot.
func (c *Config) check(doc *configfile.Doc) configfile.Errors {
	var errs configfile.Errors
	if c.Step.D() < 30*time.Second {
		errs = append(errs, doc.Errorf("step", "%s: must be at least 30s", c.Step))
	}
	if c.MinCoverage == 0 {
		errs = append(errs, doc.Errorf("min_coverage", "must be above 0: a step without data is unknown, never idle"))
	}
	if c.Idle.FloorQuantile == 0 {
		errs = append(errs, doc.Errorf("idle.floor_quantile", "must be above 0: the floor must cover the idle boards' draws"))
	}
	if c.Idle.FloorMinSamples < 1 {
		errs = append(errs, doc.Errorf("idle.floor_min_samples", "%d: must be at least 1", c.Idle.FloorMinSamples))
	}
	if c.Idle.MemoryHeldMiB < 0 {
		errs = append(errs, doc.Errorf("idle.memory_held_mib", "must not be negative"))
	}
	return errs
}

// Duration is gpuwatch's one configuration duration ("90s", "2h", "1d",
// "2w"), positive.
type Duration = configfile.Duration

// Ratio is a number in [0, 1].
type Ratio = configfile.Ratio

// Percent is a number in [0, 100].
type Percent = configfile.Percent

// Disabled reports whether the detector of a pattern is switched off: the
// section whose YAML key is the pattern's name sets disabled. A pattern
// without a section is on.
func (p Patterns) Disabled(pattern string) bool {
	v := reflect.ValueOf(p)
	for i := 0; i < v.NumField(); i++ {
		if strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0] != pattern {
			continue
		}
		if s, ok := v.Field(i).FieldByName("Switch").Interface().(Switch); ok {
			return s.Disabled
		}
	}
	return false
}
