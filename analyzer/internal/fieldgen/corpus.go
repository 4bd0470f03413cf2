package fieldgen

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// The field's definitions the corpus' labels follow. Each case sits well
// inside or well outside them; none is placed near a threshold of
// gpuwatch's.
const (
	whyZeroUtil = "Princeton Research Computing's Job Defense Shield reports jobs whose allocated GPUs " +
		"stay at 0 % utilization through the job as wasted, the whole allocation; a CUDA image that fell " +
		"back to the CPU creates a context and nothing else"
	whyIdleGPUs = "Job Defense Shield's multi-GPU check: GPUs of a job at 0 % utilization for the whole " +
		"job are wasted, each for the job's length"
	whyIdleSession = "jupyterhub-idle-culler (Zero to JupyterHub's cull.timeout, default one hour) culls a " +
		"server idle past its timeout: a session left open for hours holds its GPU for nothing from its " +
		"last activity on; half an hour idle is not culled"
	whyHung = "NVIDIA's DCGM documentation: GPU_UTIL is the share of time a kernel runs, so a rank " +
		"spinning in a hung NCCL collective reads 100 % while SM activity and power stay near idle; every " +
		"GPU-hour from the hang on is lost"
	whySlowStart = "GPU time held before the first kernel (staging data, building the environment) is " +
		"held and unused, for every GPU of the job"
	whyLight = "Job Defense Shield's low-utilization check: a job whose GPU stays near 10 % through the job " +
		"uses a tenth of what it holds; the rest (allocated × (1 − utilization)) is wasted"
	whyLightSession = "an interactive session whose cells keep an 80 GB GPU busy about 12 % of the time " +
		"is the fraction-of-a-GPU work that sites move to MIG slices (Princeton Research Computing's MIG " +
		"partition for Jupyter); its GPU-hours count as the low-utilization check counts them"
	whyBusy = "training, evaluation and checkpoints, an input-bound pipeline at about half load, a service " +
		"whose bursts keep the GPU busy a third of the time: uses of the GPU, not waste"
)

// Exporter pods as three installs name them: NVIDIA's Helm chart
// (<release>-dcgm-exporter-<suffix>, container exporter), the GPU Operator
// (nvidia-dcgm-exporter-<suffix>) and a site's own DaemonSet. Nodes that
// run no exporter pod (Slurm nodes run dcgm-exporter as a service) get
// none.
var ExporterSchemes = map[string]func(host string, epoch int) (string, string, string){
	"helm": func(host string, e int) (string, string, string) {
		return "telemetry-dcgm-exporter-" + PodSuffix(host, e), "monitoring", "exporter"
	},
	"gpu-operator": func(host string, e int) (string, string, string) {
		return "nvidia-dcgm-exporter-" + PodSuffix(host, e), "gpu-operator", "nvidia-dcgm-exporter"
	},
	"custom": func(host string, e int) (string, string, string) {
		return "gpu-metrics-" + PodSuffix(host, e), "ops", "collector"
	},
}

func slurm(id string) Holder { return Holder{Slurm: id} }

func pod(ns, name string) Holder { return Holder{Namespace: ns, Pod: name, Container: "main"} }

// waste is one label of gh GPU-hours of pattern p.
func waste(p schema.Pattern, gh float64) []Label { return []Label{{Pattern: p, GPUHours: gh}} }

// PodSuffix is a DaemonSet pod's random tail, fixed per node and epoch.
func PodSuffix(host string, epoch int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", host, epoch)
	v := h.Sum64()
	var b [5]byte
	for i := range b {
		b[i] = alphabet[v%uint64(len(alphabet))]
		v /= uint64(len(alphabet))
	}
	return string(b[:])
}

// OnKubernetes limits an exporter scheme to the Kubernetes cluster's
// nodes.
func OnKubernetes(scheme func(string, int) (string, string, string)) func(string, int) (string, string, string) {
	return func(host string, e int) (string, string, string) {
		if !strings.HasPrefix(host, "gpu-b") {
			return "", "", ""
		}
		return scheme(host, e)
	}
}

// Corpus is two clusters in one store, 36 hours: a Slurm cluster of A100
// nodes scraped at 60, 30 and 15 s, and a Kubernetes cluster of H100
// nodes scraped at 15, 30 and 60 s.
func Corpus() *Site {
	h := time.Hour
	m := time.Minute
	s := &Site{Span: 36 * h}
	for i, iv := range []time.Duration{60 * time.Second, 60 * time.Second, 30 * time.Second, 15 * time.Second} {
		s.Nodes = append(s.Nodes, Node{Host: fmt.Sprintf("hpc-a%02d", i+1), Model: A100, GPUs: 4, Interval: iv, Cluster: "hpc"})
	}
	for i, iv := range []time.Duration{15 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second} {
		s.Nodes = append(s.Nodes, Node{Host: fmt.Sprintf("gpu-b%02d", i+1), Model: H100, GPUs: 4, Interval: iv, Cluster: "k8s"})
	}
	s.Work = []Work{
		// The Slurm cluster.
		{Case: "CUDA job on the CPU", Node: "hpc-a01", GPUs: []int{0}, Holder: slurm("71001"), Start: 2 * h, End: 10 * h,
			Shape: CPUFallback(), Waste: waste(schema.CPUOnly, 8), Why: whyZeroUtil},
		{Case: "training, 20 h", Node: "hpc-a01", GPUs: []int{1, 2}, Holder: slurm("71002"), Start: 1 * h, End: 21 * h,
			Shape: Training(95), Why: whyBusy},
		{Case: "hung collective after 3 h", Node: "hpc-a02", GPUs: []int{0, 1, 2, 3}, Holder: slurm("71003"), Start: 4 * h, End: 13 * h,
			Shape: Hung(3 * h), Waste: waste(schema.Stuck, 4*6), Why: whyHung},
		{Case: "4 GPUs, computes on one", Node: "hpc-a03", GPUs: []int{0, 1, 2, 3}, Holder: slurm("71004"), Start: 14 * h, End: 24 * h,
			Shape: Partial(), Waste: waste(schema.OverRequested, 3*10), Why: whyIdleGPUs},
		{Case: "50 minutes before the first kernel", Node: "hpc-a04", GPUs: []int{0, 1}, Holder: slurm("71005"), Start: 3 * h, End: 9 * h,
			Shape: SlowStart(50 * m), Waste: waste(schema.StartupOverhead, 2*50.0/60), Why: whySlowStart},
		{Case: "light model on a large GPU", Node: "hpc-a04", GPUs: []int{2}, Holder: slurm("71006"), Start: 12 * h, End: 22 * h,
			Shape: LightModel(), Waste: waste(schema.LowUtilization, 10*0.88), Why: whyLight},
		{Case: "input-bound training", Node: "hpc-a03", GPUs: []int{0, 1}, Holder: slurm("71007"), Start: 1 * h, End: 13 * h,
			Shape: InputBound(), Why: whyBusy},
		{Case: "training with checkpoints, 30 h", Node: "hpc-a04", GPUs: []int{3}, Holder: slurm("71008"), Start: 2 * h, End: 32 * h,
			Shape: Training(97), Why: whyBusy},
		// The Kubernetes cluster.
		{Case: "Deployment whose image fell back to the CPU", Node: "gpu-b01", GPUs: []int{0}, Holder: pod("serving", "embed-api-7d4b9c8f6d-x2k9q"),
			Start: 1 * h, End: 33 * h, Shape: CPUFallback(), Waste: waste(schema.CPUOnly, 32), Why: whyZeroUtil},
		{Case: "bursty inference service", Node: "gpu-b01", GPUs: []int{1}, Holder: pod("serving", "ranker-5f6d7c9b8d-q7w2m"),
			Start: 1 * h, End: 35 * h, Shape: BurstyService(), Why: whyBusy},
		{Case: "notebook left open", Node: "gpu-b02", GPUs: []int{0}, Holder: pod("lab", "jupyter-alice"), Start: 5 * h, End: 15 * h,
			Shape: IdleNotebook(40 * m), Waste: waste(schema.IdleSession, 10-40.0/60), Why: whyIdleSession},
		{Case: "notebook in use for 8 h, a fifth of the time, then idle half an hour", Node: "gpu-b02", GPUs: []int{1}, Holder: pod("lab", "jupyter-bob"),
			Start: 6 * h, End: 14*h + 30*m, Shape: IdleNotebook(8 * h), Waste: waste(schema.LowUtilization, 8.5*(1-0.12)), Why: whyIdleSession + "; " + whyLightSession},
		{Case: "hung collective after 2 h", Node: "gpu-b03", GPUs: []int{0, 1, 2, 3}, Holder: pod("train", "ddp-worker-0"), Start: 3 * h, End: 10 * h,
			Shape: Hung(2 * h), Waste: waste(schema.Stuck, 4*5), Why: whyHung},
		{Case: "fine-tuning, 16 h", Node: "gpu-b03", GPUs: []int{0, 1}, Holder: pod("train", "finetune-0"), Start: 12 * h, End: 28 * h,
			Shape: Training(93), Why: whyBusy},
		{Case: "2 GPUs, computes on one", Node: "gpu-b04", GPUs: []int{0, 1}, Holder: pod("research", "sweep-3"), Start: 2 * h, End: 10 * h,
			Shape: Partial(), Waste: waste(schema.OverRequested, 8), Why: whyIdleGPUs},
		{Case: "light model, 12 h", Node: "gpu-b04", GPUs: []int{2}, Holder: pod("research", "light-1"), Start: 14 * h, End: 26 * h,
			Shape: LightModel(), Waste: waste(schema.LowUtilization, 12*0.88), Why: whyLight},
	}
	return s
}
