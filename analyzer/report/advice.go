package report

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// migProfile is one MIG slice: its name and memory in GiB.
type migProfile struct {
	name   string
	memGiB float64
	// sevenths of the GPU's compute the slice takes.
	slices int
}

// migTables lists NVIDIA's MIG profiles per GPU family, smallest first.
// Model names are matched by substring, most specific first.
var migTables = []struct {
	match    []string // all must be in the model name
	totalGiB float64
	profiles []migProfile
}{
	{[]string{"A100", "80GB"}, 80, []migProfile{{"1g.10gb", 10, 1}, {"2g.20gb", 20, 2}, {"3g.40gb", 40, 3}, {"4g.40gb", 40, 4}, {"7g.80gb", 80, 7}}},
	{[]string{"A100"}, 40, []migProfile{{"1g.5gb", 5, 1}, {"2g.10gb", 10, 2}, {"3g.20gb", 20, 3}, {"4g.20gb", 20, 4}, {"7g.40gb", 40, 7}}},
	{[]string{"H100", "94GB"}, 94, []migProfile{{"1g.12gb", 12, 1}, {"2g.24gb", 24, 2}, {"3g.47gb", 47, 3}, {"4g.47gb", 47, 4}, {"7g.94gb", 94, 7}}},
	{[]string{"H100"}, 80, []migProfile{{"1g.10gb", 10, 1}, {"2g.20gb", 20, 2}, {"3g.40gb", 40, 3}, {"4g.40gb", 40, 4}, {"7g.80gb", 80, 7}}},
	{[]string{"H200"}, 141, []migProfile{{"1g.18gb", 18, 1}, {"2g.35gb", 35, 2}, {"3g.71gb", 71, 3}, {"4g.71gb", 71, 4}, {"7g.141gb", 141, 7}}},
	{[]string{"B200"}, 180, []migProfile{{"1g.23gb", 23, 1}, {"2g.45gb", 45, 2}, {"3g.90gb", 90, 3}, {"4g.90gb", 90, 4}, {"7g.180gb", 180, 7}}},
	{[]string{"A30"}, 24, []migProfile{{"1g.6gb", 6, 1}, {"2g.12gb", 12, 2}, {"4g.24gb", 24, 4}}},
}

// smallerGPUs are whole GPUs to suggest when the model has no MIG.
var smallerGPUs = []struct {
	name   string
	memGiB float64
}{{"T4 (16 GB)", 16}, {"L4 (24 GB)", 24}, {"L40S (48 GB)", 48}}

// modelMemGiB is the memory of whole GPUs by model-name part, most
// specific first, so a smaller GPU is only suggested when it is smaller.
var modelMemGiB = []struct {
	match  []string
	memGiB float64
}{
	{[]string{"A100", "80GB"}, 80}, {[]string{"A100"}, 40}, {[]string{"H100", "94GB"}, 94}, {[]string{"H100"}, 80},
	{[]string{"H200"}, 141}, {[]string{"B200"}, 180}, {[]string{"L40"}, 48}, {[]string{"A40"}, 48}, {[]string{"L4"}, 24},
	{[]string{"A10"}, 24}, {[]string{"A30"}, 24}, {[]string{"T4"}, 16}, {[]string{"V100", "32GB"}, 32}, {[]string{"V100"}, 16},
}

func matchAll(model string, parts []string) bool {
	for _, m := range parts {
		if !strings.Contains(model, m) {
			return false
		}
	}
	return true
}

// gpuMemGiB is the model's memory, or +Inf when unknown (any smaller GPU
// may then be suggested).
func gpuMemGiB(model string) float64 {
	for _, m := range modelMemGiB {
		if matchAll(model, m.match) {
			return m.memGiB
		}
	}
	return math.Inf(1)
}

// headroom keeps a recommendation from fitting the observed peak exactly.
const headroom = 1.2

// peakMemoryGiB finds the job's peak GPU memory among the evidence. The
// analyzer's evidence keys name memory as fb/mem with a unit suffix; the
// largest such value is the peak.
func peakMemoryGiB(ev map[string]float64) (float64, bool) {
	best, ok := 0.0, false
	for k, v := range ev {
		k = strings.ToLower(k)
		if !(strings.Contains(k, "fb") || strings.Contains(k, "mem")) || strings.Contains(k, "free") ||
			strings.Contains(k, "total") || strings.Contains(k, "util") || strings.Contains(k, "temp") {
			continue
		}
		var gib float64
		switch {
		case strings.HasSuffix(k, "_mib"):
			gib = v / 1024
		case strings.HasSuffix(k, "_bytes"):
			gib = v / (1 << 30)
		case strings.HasSuffix(k, "_gib"):
			gib = v
		default:
			continue
		}
		if gib > best || !ok {
			best, ok = gib, true
		}
	}
	return best, ok
}

// fitMIG returns the smallest MIG profile of model that holds peakGiB with
// headroom, and the fraction of the GPU it takes.
func fitMIG(model string, peakGiB float64) (migProfile, bool) {
	for _, t := range migTables {
		if !matchAll(model, t.match) {
			continue
		}
		for _, p := range t.profiles {
			if p.memGiB >= peakGiB*headroom && p.slices < 7 {
				return p, true
			}
		}
		return migProfile{}, false
	}
	return migProfile{}, false
}

// Advise writes concrete advice for one finding: the change that would
// have avoided the waste, with the numbers that justify it.
func Advise(f *finding.Finding) string {
	ev := f.Evidence
	gpus := len(f.GPUs)
	switch f.Pattern {
	case finding.LowUtilization:
		util := firstOf(ev, "gpu_util_mean", "util_mean", "mean_util", "mean_util_percent", "gpu_util", "sm_active_mean")
		if sm, ok := ev["mean_sm_active"]; ok && math.IsNaN(util) {
			util = 100 * sm // the detector's SM activity is a ratio
		}
		peak, ok := peakMemoryGiB(ev)
		utilText := ""
		if !math.IsNaN(util) {
			utilText = fmt.Sprintf("averaged %.0f%% GPU utilisation", util)
		} else {
			utilText = "used its GPU lightly"
		}
		if ok {
			if p, fits := fitMIG(f.ModelName, peak); fits {
				return fmt.Sprintf("%s and peaked at %.1f GiB of GPU memory: a MIG %s slice (%.0f GiB, %d/7 of the GPU) would fit it and free the rest for others.",
					capital(utilText), peak, p.name, p.memGiB, p.slices)
			}
			for _, g := range smallerGPUs {
				if g.memGiB >= peak*headroom && g.memGiB < gpuMemGiB(f.ModelName) {
					return fmt.Sprintf("%s and peaked at %.1f GiB of GPU memory: a smaller GPU such as the %s would do; or share the GPU (MPS) with similar jobs.",
						capital(utilText), peak, g.name)
				}
			}
			return fmt.Sprintf("%s with %.1f GiB of memory: batch more work per GPU (larger batches, several runs per GPU with MPS).", capital(utilText), peak)
		}
		return capital(utilText) + ": request a MIG slice or a smaller GPU, or pack several runs onto one GPU (MPS)."
	case finding.CPUOnly:
		return fmt.Sprintf("Held %s without ever using the GPU: run it in a CPU partition (no --gres=gpu / no nvidia.com/gpu request), or check that the code actually selects CUDA.", plural(gpus, "GPU"))
	case finding.OverRequested:
		used := firstOf(ev, "gpus_used", "used_gpus", "active_gpus")
		if idle, ok := ev["idle_gpus"]; ok && math.IsNaN(used) {
			used = float64(gpus) - idle // the detector counts the idle ones
		}
		if !math.IsNaN(used) && gpus > 0 {
			return fmt.Sprintf("Only %.0f of %d GPUs did work: request --gres=gpu:%.0f (or fix the data-parallel launch so every rank gets a GPU).", used, gpus, used)
		}
		return "Some of its GPUs stayed idle: request only the GPUs the job uses, or check the launcher starts one rank per GPU."
	case finding.Stuck:
		return "Stopped making progress while holding the GPUs: set a collective timeout (NCCL_TIMEOUT / torch.distributed timeout) and a watchdog that exits on no progress, and checkpoint so a restart loses little."
	case finding.StartupOverhead:
		mins := firstOf(ev, "startup_minutes", "minutes_to_first_activity", "startup_seconds")
		if _, sec := ev["startup_seconds"]; sec && !math.IsNaN(mins) {
			mins /= 60
		}
		lead := "Waited long"
		if !math.IsNaN(mins) {
			lead = fmt.Sprintf("Waited %.0f minutes", mins)
		}
		return lead + " before first GPU use: stage data to local scratch and pre-pull container images in a CPU step (or a job dependency) before requesting GPUs."
	case finding.IdleSession:
		return "An interactive session sat idle: close notebooks when done, and use a shorter session time limit; idle sessions are reclaimed by policy."
	case finding.Overlong:
		return "Ran past its tier's time limit: checkpoint regularly (e.g. hourly), handle SIGUSR1 to save state, and resubmit from the checkpoint instead of running open-ended."
	case finding.OrphanProcess:
		return "A process kept GPU memory after its job ended: make the job kill its whole process group on exit (trap EXIT / use srun), so the next job gets a clean GPU."
	}
	return f.Advice
}

func firstOf(ev map[string]float64, keys ...string) float64 {
	for _, k := range keys {
		if v, ok := ev[k]; ok {
			return v
		}
	}
	return math.NaN()
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if n == 0 {
		return word + "s"
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
