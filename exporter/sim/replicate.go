package sim

import (
	"fmt"
	"maps"
	"slices"
)

// Replicate returns the scenario with its fleet repeated copies times: copy
// k (from 2) renames every node to "<host>-c<k>" and every job to
// "<id>-c<k>", with the same workloads, faults and ground truth. The demo
// uses it to size a fleet (--nodes) without a scenario file per size; the
// noise of each copy differs because it is keyed by node and job.
func (s *Scenario) Replicate(copies int) (*Scenario, error) {
	if copies < 1 {
		return nil, fmt.Errorf("replicate: copies must be at least 1, got %d", copies)
	}
	if n := len(s.Nodes) * copies; n*maxGPUs(s.Nodes) > maxFleetGPUs {
		return nil, fmt.Errorf("replicate: %d nodes would exceed the simulator's %d GPUs", n, maxFleetGPUs)
	}
	out := *s
	out.Nodes = slices.Clone(s.Nodes)
	out.Workloads = slices.Clone(s.Workloads)
	out.Faults = slices.Clone(s.Faults)
	for k := 2; k <= copies; k++ {
		suffix := fmt.Sprintf("-c%d", k)
		for _, n := range s.Nodes {
			n.Hostname += suffix
			n.MIG = maps.Clone(n.MIG)
			out.Nodes = append(out.Nodes, n)
		}
		for _, w := range s.Workloads {
			w.Node += suffix
			w.ID += suffix
			w.GPUs = slices.Clone(w.GPUs)
			w.Labels = maps.Clone(w.Labels)
			w.Expect = slices.Clone(w.Expect)
			w.key = hashString(w.Node + "/" + w.ID)
			out.Workloads = append(out.Workloads, w)
		}
		for _, f := range s.Faults {
			f.Node += suffix
			f.GPUs = slices.Clone(f.GPUs)
			out.Faults = append(out.Faults, f)
		}
	}
	return &out, nil
}

func maxGPUs(nodes []Node) int {
	m := 0
	for _, n := range nodes {
		m = max(m, n.GPUs)
	}
	return m
}
