package features

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// HAMi (github.com/Project-HAMi/HAMi) shares a GPU among containers by
// reservation: each container asks for a share of the device's cores
// (nvidia.com/gpucores, percent) and memory (nvidia.com/gpumem, MiB), which
// HAMi-core enforces inside the container. The gap between what a
// container reserved and what it used is the share's waste: no other
// container can be scheduled into it.
//
// HAMi publishes the reservation and the use itself. Names and labels as
// its code defines them (cmd/vGPUmonitor/metrics.go, the per-node monitor;
// cmd/scheduler/metrics.go, the scheduler), with the older names it still
// writes under --legacy-metrics and wrote before v2.9:
//   - hami_vgpu_memory_used_bytes (vGPU_device_memory_usage_in_bytes) and
//     hami_vgpu_memory_limit_bytes (vGPU_device_memory_limit_in_bytes):
//     a container's device memory used and its limit;
//   - hami_container_device_utilization_ratio
//     (Device_utilization_desc_of_container): the container's SM
//     utilization of the device, 0-100;
//     all three labelled namespace, pod, container, vdevice_index,
//     device_uuid (podnamespace, podname, ctrname, vdeviceid, deviceuuid);
//   - hami_vgpu_core_allocated_ratio (vGPUCoreAllocated): the cores
//     reserved, percent of the device, labelled namespace, node, pod,
//     container_index, device_uuid (podnamespace, nodename, podname,
//     containeridx, deviceuuid): a container's index, not its name.
// Scraped with honor_labels: false, the namespace, pod and container
// labels become exported_* beside the monitor's own pod.

// HAMiSeries names one HAMi metric under its current and its legacy name.
type HAMiSeries struct{ Name, Legacy string }

// The HAMi series the analyzer reads.
var (
	HAMiMemoryUsed  = HAMiSeries{"hami_vgpu_memory_used_bytes", "vGPU_device_memory_usage_in_bytes"}
	HAMiMemoryLimit = HAMiSeries{"hami_vgpu_memory_limit_bytes", "vGPU_device_memory_limit_in_bytes"}
	HAMiSMUtil      = HAMiSeries{"hami_container_device_utilization_ratio", "Device_utilization_desc_of_container"}
	HAMiCores       = HAMiSeries{"hami_vgpu_core_allocated_ratio", "vGPUCoreAllocated"}
)

// ShareWaste is one container's HAMi share of a GPU over a window: what it
// reserved, what it used, and the quota that would have held its use.
type ShareWaste struct {
	Host      string `json:"hostname"`
	UUID      string `json:"uuid"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	// Hours is the time the container's use was seen in the window.
	Hours float64 `json:"hours"`
	// HasCores is false where the scheduler's reservation could not be
	// tied to the container (several containers of one pod on the device:
	// the scheduler names them by index, the monitor by name).
	HasCores bool `json:"has_cores"`
	// ReservedCores is the reserved share of the device's cores (%);
	// UsedCoresMean and UsedCoresPeak its SM utilization of the device (%).
	ReservedCores float64 `json:"reserved_cores_percent"`
	UsedCoresMean float64 `json:"used_cores_mean_percent"`
	UsedCoresPeak float64 `json:"used_cores_peak_percent"`
	// ReservedMiB is the memory limit, UsedPeakMiB the most it held.
	ReservedMiB float64 `json:"reserved_mib"`
	UsedPeakMiB float64 `json:"used_peak_mib"`
	// WastedGPUHours is the reserved cores it did not use, over Hours:
	// the device time no one else could be given.
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	// FitCores and FitMiB are the quota that would have held its peak use
	// with headroom (never more than it reserved): nvidia.com/gpucores and
	// nvidia.com/gpumem. FitCores 0: it never used the GPU.
	FitCores float64 `json:"fit_cores_percent"`
	FitMiB   float64 `json:"fit_mib"`
	// Advice says it in words (ShareWaste.Advice).
	Advice string `json:"advice"`
}

// hamiHeadroom is the room a fitting quota leaves above the window's peak
// use: HAMi-core throttles a container at its core limit and fails its
// allocations past its memory limit, so a quota at the peak itself would
// slow or break the next busier hour.
const hamiHeadroom = 1.25

// The steps fitting quotas are rounded up to: a twentieth of the cores,
// a GiB of memory (the sizes HAMi's examples request).
const (
	hamiCoreStep = 5
	hamiMiBStep  = 1024
)

// hamiParts are the parts of the one HAMi query, told apart by
// SignalLabel: each an aggregate over the window of one series, under its
// current name and its legacy one.
var hamiParts = []struct {
	signal, fn string
	series     HAMiSeries
}{
	{"mem_used", "max", HAMiMemoryUsed},
	{"mem_limit", "max", HAMiMemoryLimit},
	{"sm_mean", "avg", HAMiSMUtil},
	{"sm_peak", "max", HAMiSMUtil},
	{"sm_samples", "count", HAMiSMUtil},
	{"cores", "max", HAMiCores},
}

// HAMiExpr is the one query ReadHAMi issues for a window.
func HAMiExpr(window time.Duration) string {
	w := fmt.Sprintf("[%dms]", window.Milliseconds())
	var parts []string
	for _, p := range hamiParts {
		for _, name := range []string{p.series.Name, p.series.Legacy} {
			parts = append(parts, fmt.Sprintf(`label_replace(%s_over_time(%s%s), "%s", "%s", "", "")`, p.fn, name, w, SignalLabel, p.signal))
		}
	}
	return strings.Join(parts, " or ")
}

// ReadHAMi reads, with one query, every HAMi container share's reservation
// and use over the window ending at at, and returns each container's
// waste, sorted by host, device and container.
func ReadHAMi(ctx context.Context, q query.Querier, at time.Time, window time.Duration) ([]ShareWaste, error) {
	if window < time.Second {
		return nil, fmt.Errorf("read HAMi shares: window %s too short", window)
	}
	v, err := q.Query(ctx, HAMiExpr(window), at)
	if err != nil {
		return nil, fmt.Errorf("read HAMi shares: %w", err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("read HAMi shares: answer is %s, want a vector", v.Type())
	}
	return hamiWaste(vec, window), nil
}

// hamiContainer gathers one container's parts.
type hamiContainer struct {
	ShareWaste
	vals map[string]float64
}

// hamiLabel is the first of a series' labels that is set.
func hamiLabel(m model.Metric, names ...string) string {
	for _, n := range names {
		if v := lv(m, n); v != "" {
			return v
		}
	}
	return ""
}

// hamiWaste joins the parts per container and works out each one's waste.
func hamiWaste(vec model.Vector, window time.Duration) []ShareWaste {
	ctrs := map[string]*hamiContainer{}
	cores := map[string]float64{} // by namespace/pod/device: the scheduler's reservation
	coreIdx := map[string]int{}   // containers of the pod on the device the scheduler reserved for
	hosts := map[string]string{}  // by device: the scheduler's node
	for _, s := range vec {
		m := s.Metric
		// HAMi's own labels first: the legacy names beside a plain
		// namespace or pod (the scrape target's) are the container's.
		ns := hamiLabel(m, ExportedPrefix+"namespace", "podnamespace", "namespace")
		pod := hamiLabel(m, ExportedPrefix+"pod", "podname", "pod")
		dev := hamiLabel(m, "device_uuid", "deviceuuid")
		if ns == "" || pod == "" || dev == "" {
			continue
		}
		val := float64(s.Value)
		if math.IsNaN(val) {
			continue
		}
		podDev := ns + "/" + pod + "|" + dev
		if lv(m, SignalLabel) == "cores" {
			cores[podDev] = max(cores[podDev], val)
			coreIdx[podDev]++
			if n := hamiLabel(m, "node", "nodename"); n != "" {
				hosts[dev] = n
			}
			continue
		}
		ctr := hamiLabel(m, ExportedPrefix+"container", "ctrname", "container")
		k := podDev + "|" + ctr
		c := ctrs[k]
		if c == nil {
			c = &hamiContainer{ShareWaste: ShareWaste{Host: Host(m), UUID: dev, Namespace: ns, Pod: pod, Container: ctr}, vals: map[string]float64{}}
			ctrs[k] = c
		}
		// A monitor writing both names (--legacy-metrics) gives each part
		// twice, alike.
		c.vals[lv(m, SignalLabel)] = max(c.vals[lv(m, SignalLabel)], val)
	}
	perPod := map[string]int{}
	most := 0.0
	for _, c := range ctrs {
		perPod[c.Namespace+"/"+c.Pod+"|"+c.UUID]++
		most = max(most, c.vals["sm_samples"])
	}
	out := make([]ShareWaste, 0, len(ctrs))
	for _, c := range ctrs {
		podDev := c.Namespace + "/" + c.Pod + "|" + c.UUID
		if h := hosts[c.UUID]; h != "" {
			c.Host = h
		}
		if r, ok := cores[podDev]; ok && perPod[podDev] == 1 && coreIdx[podDev] == 1 {
			c.HasCores, c.ReservedCores = true, r
		}
		c.settle(window, most)
		c.Advice = c.advice()
		out = append(out, c.ShareWaste)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Host+"|"+a.UUID+"|"+a.Namespace+"/"+a.Pod+"|"+a.Container < b.Host+"|"+b.UUID+"|"+b.Namespace+"/"+b.Pod+"|"+b.Container
	})
	return out
}

// settle works out a container's figures from its parts: its hours are
// the window's, by its samples against the best-covered container's (the
// monitor scrapes all of them together).
func (c *hamiContainer) settle(window time.Duration, mostSamples float64) {
	v := c.vals
	if mostSamples > 0 {
		c.Hours = window.Hours() * v["sm_samples"] / mostSamples
	}
	c.UsedCoresMean, c.UsedCoresPeak = v["sm_mean"], v["sm_peak"]
	c.ReservedMiB, c.UsedPeakMiB = v["mem_limit"]/(1<<20), v["mem_used"]/(1<<20)
	c.FitMiB = fitUp(c.UsedPeakMiB*hamiHeadroom, hamiMiBStep)
	if c.ReservedMiB > 0 {
		c.FitMiB = min(c.FitMiB, c.ReservedMiB)
	}
	if c.HasCores {
		c.WastedGPUHours = c.Hours * max(0, c.ReservedCores-c.UsedCoresMean) / 100
		c.FitCores = min(fitUp(c.UsedCoresPeak*hamiHeadroom, hamiCoreStep), c.ReservedCores)
	}
}

// fitUp rounds v up to a multiple of step.
func fitUp(v, step float64) float64 { return math.Ceil(v/step) * step }

// advice says a share's waste and the quota that would fit, in HAMi's
// resource names.
func (w ShareWaste) advice() string {
	mem := fmt.Sprintf("%.1f of %.1f GiB", w.UsedPeakMiB/1024, w.ReservedMiB/1024)
	if !w.HasCores {
		return fmt.Sprintf("Peak memory %s reserved: nvidia.com/gpumem: %.0f would hold it.", mem, w.FitMiB)
	}
	if w.UsedCoresPeak <= 0 {
		return fmt.Sprintf("Never used its %.0f%% of the GPU's cores (memory %s): release the share.", w.ReservedCores, mem)
	}
	if w.FitCores >= w.ReservedCores && w.FitMiB >= w.ReservedMiB {
		return fmt.Sprintf("Used %.0f%% (peak %.0f%%) of its %.0f%% of the cores and %s: the share fits its use.",
			w.UsedCoresMean, w.UsedCoresPeak, w.ReservedCores, mem)
	}
	return fmt.Sprintf("Used %.0f%% (peak %.0f%%) of its %.0f%% of the cores and %s: nvidia.com/gpucores: %.0f and nvidia.com/gpumem: %.0f would hold it.",
		w.UsedCoresMean, w.UsedCoresPeak, w.ReservedCores, mem, w.FitCores, w.FitMiB)
}
