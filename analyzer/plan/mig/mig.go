// Package mig holds the Multi-Instance GPU geometry of the GPU models that
// support it, as NVIDIA's MIG user guide lists them ("Supported MIG
// Profiles"): for each model its GPU instance profiles (compute slices,
// memory slices, memory size) and the start slots where each may be placed.
// A layout of instances on one GPU is placeable when every instance sits at
// one of its profile's start slots, no two instances share a memory slice
// and the compute slices add up to no more than the GPU has. The planner
// proposes only layouts that Validate accepts.
package mig

import (
	"fmt"
	"sort"
	"strings"
)

// Profile is one GPU instance profile of a model.
type Profile struct {
	Name string // e.g. 3g.40gb
	// Compute and Memory are the compute and memory slices the instance
	// takes (of the model's ComputeSlices and MemorySlices).
	Compute, Memory int
	// MemoryGB is the memory the profile's name states (decimal GB).
	MemoryGB float64
	// Starts are the memory-slice indexes an instance may start at; it
	// covers Memory slices from there.
	Starts []int
}

// MemoryMiB is the instance's memory in MiB, as the name states it.
func (p *Profile) MemoryMiB() float64 { return p.MemoryGB * 1e9 / (1 << 20) }

// Model is the MIG geometry of one GPU model.
type Model struct {
	Key string // short name, e.g. A100-80GB
	// Match lists lower-case substrings of the NVML device name (the
	// modelName label) that identify the model; all must occur.
	Match []string
	// MemoryGB is the whole GPU's memory as marketed.
	MemoryGB float64
	// TFLOPS is dense FP16/BF16 tensor throughput from the data sheet: how
	// much a whole GPU of one model computes against another.
	TFLOPS                      float64
	ComputeSlices, MemorySlices int
	// Profiles, smallest first (by compute, then memory). The media
	// extension variants (+me) are left out: they take the same slices as
	// their plain profile and only one may exist per GPU, which a plan for
	// compute and memory does not need.
	Profiles []Profile
}

// geometry of the A100/H100/H200/B200 family: 7 compute and 8 memory slices.
func family(key string, match []string, total, tflops float64, gb [4]float64) Model {
	// gb: the memory of 1 slice, 2 slices, 4 slices and the whole GPU.
	return Model{Key: key, Match: match, MemoryGB: total, TFLOPS: tflops, ComputeSlices: 7, MemorySlices: 8, Profiles: []Profile{
		{Name: fmt.Sprintf("1g.%ggb", gb[0]), Compute: 1, Memory: 1, MemoryGB: gb[0], Starts: []int{0, 1, 2, 3, 4, 5, 6}},
		{Name: fmt.Sprintf("1g.%ggb", gb[1]), Compute: 1, Memory: 2, MemoryGB: gb[1], Starts: []int{0, 2, 4, 6}},
		{Name: fmt.Sprintf("2g.%ggb", gb[1]), Compute: 2, Memory: 2, MemoryGB: gb[1], Starts: []int{0, 2, 4}},
		{Name: fmt.Sprintf("3g.%ggb", gb[2]), Compute: 3, Memory: 4, MemoryGB: gb[2], Starts: []int{0, 4}},
		{Name: fmt.Sprintf("4g.%ggb", gb[2]), Compute: 4, Memory: 4, MemoryGB: gb[2], Starts: []int{0}},
		{Name: fmt.Sprintf("7g.%ggb", gb[3]), Compute: 7, Memory: 8, MemoryGB: gb[3], Starts: []int{0}},
	}}
}

// models, smallest memory first so that Smaller finds the least GPU that does.
var models = []Model{
	family("A100-40GB", []string{"a100", "40gb"}, 40, 312, [4]float64{5, 10, 20, 40}),
	family("A100-80GB", []string{"a100", "80gb"}, 80, 312, [4]float64{10, 20, 40, 80}),
	family("H100-80GB", []string{"h100", "80gb"}, 80, 989, [4]float64{10, 20, 40, 80}),
	family("H100-94GB", []string{"h100", "nvl"}, 94, 835, [4]float64{12, 24, 47, 94}),
	family("H200-141GB", []string{"h200"}, 141, 989, [4]float64{18, 35, 71, 141}),
	family("B200-180GB", []string{"b200"}, 180, 2250, [4]float64{23, 45, 90, 180}),
}

// Models lists every model with MIG geometry, smallest memory first.
func Models() []*Model {
	out := make([]*Model, len(models))
	for i := range models {
		out[i] = &models[i]
	}
	return out
}

// Lookup finds the geometry of a device by its NVML name (modelName), e.g.
// "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 NVL",
// "NVIDIA H200". A model without MIG (L40S, T4) is not found.
func Lookup(name string) (*Model, bool) {
	n := strings.ToLower(name)
	for i := range models {
		ok := true
		for _, s := range models[i].Match {
			ok = ok && strings.Contains(n, s)
		}
		if ok {
			return &models[i], true
		}
	}
	return nil, false
}

// Profile returns the named profile of the model.
func (m *Model) Profile(name string) (*Profile, bool) {
	for i := range m.Profiles {
		if m.Profiles[i].Name == name {
			return &m.Profiles[i], true
		}
	}
	return nil, false
}

// Whole is the profile that takes the whole GPU.
func (m *Model) Whole() *Profile { return &m.Profiles[len(m.Profiles)-1] }

// Fit returns the smallest profile (fewest compute slices, then fewest
// memory slices) whose compute share and memory hold the demand: compute
// is a fraction of the whole GPU's SMs (0-1), memory in MiB; both as the
// caller wants them held, headroom included. ok is false when only the
// whole GPU would do or more than the whole GPU is asked for.
func (m *Model) Fit(compute, memMiB float64) (*Profile, bool) {
	for i := range m.Profiles {
		p := &m.Profiles[i]
		if p.Compute == m.ComputeSlices {
			break
		}
		if compute <= float64(p.Compute)/float64(m.ComputeSlices) && memMiB <= p.MemoryMiB() {
			return p, true
		}
	}
	return nil, false
}

// Smaller returns the model with the least memory that holds memMiB on a
// whole GPU, when it has less memory than m; compute capacity differs
// between generations, so the caller decides whether compute allows it.
func Smaller(m *Model, memMiB float64) (*Model, bool) {
	for i := range models {
		c := &models[i]
		if c.MemoryGB >= m.MemoryGB {
			return nil, false
		}
		if memMiB <= c.MemoryGB*1e9/(1<<20) {
			return c, true
		}
	}
	return nil, false
}

// Instance is one GPU instance of a layout: a profile at a start slot.
type Instance struct {
	Profile string `json:"profile"`
	Start   int    `json:"start"`
}

// Validate reports why a layout of instances cannot be created on one GPU
// of the model, or nil when it can.
func (m *Model) Validate(layout []Instance) error {
	used := make([]int, m.MemorySlices) // which instance (1-based) holds each memory slice
	compute := 0
	for i, in := range layout {
		p, ok := m.Profile(in.Profile)
		if !ok {
			return fmt.Errorf("%s: no profile %q", m.Key, in.Profile)
		}
		okStart := false
		for _, s := range p.Starts {
			okStart = okStart || s == in.Start
		}
		if !okStart {
			return fmt.Errorf("%s: %s cannot start at slice %d (starts %v)", m.Key, p.Name, in.Start, p.Starts)
		}
		for s := in.Start; s < in.Start+p.Memory; s++ {
			if used[s] != 0 {
				return fmt.Errorf("%s: %s at %d overlaps %s at %d", m.Key, p.Name, in.Start,
					layout[used[s]-1].Profile, layout[used[s]-1].Start)
			}
			used[s] = i + 1
		}
		compute += p.Compute
	}
	if compute > m.ComputeSlices {
		return fmt.Errorf("%s: %d compute slices, the GPU has %d", m.Key, compute, m.ComputeSlices)
	}
	return nil
}

// Place finds start slots for the given profiles on one GPU, or reports
// false when no placement of them all exists. It searches every placement
// (a GPU has at most seven instances), largest profiles first, so a false
// is definite.
func (m *Model) Place(profiles []string) ([]Instance, bool) {
	ps := make([]*Profile, len(profiles))
	compute := 0
	for i, n := range profiles {
		p, ok := m.Profile(n)
		if !ok {
			return nil, false
		}
		ps[i] = p
		compute += p.Compute
	}
	if compute > m.ComputeSlices {
		return nil, false
	}
	order := make([]int, len(ps))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := ps[order[a]], ps[order[b]]
		if x.Memory != y.Memory {
			return x.Memory > y.Memory
		}
		return len(x.Starts) < len(y.Starts)
	})
	out := make([]Instance, len(ps))
	used := make([]bool, m.MemorySlices)
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(order) {
			return true
		}
		p := ps[order[k]]
	next:
		for _, s := range p.Starts {
			for j := s; j < s+p.Memory; j++ {
				if used[j] {
					continue next
				}
			}
			for j := s; j < s+p.Memory; j++ {
				used[j] = true
			}
			out[order[k]] = Instance{Profile: p.Name, Start: s}
			if try(k + 1) {
				return true
			}
			for j := s; j < s+p.Memory; j++ {
				used[j] = false
			}
		}
		return false
	}
	if !try(0) {
		return nil, false
	}
	return out, true
}
