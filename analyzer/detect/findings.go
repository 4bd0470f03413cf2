package detect

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

func hours(from, to time.Time) float64 { return to.Sub(from).Hours() }

// Findings returns every finding the state holds (closed episodes and open
// ones), merged per key: one allocation's repeated episodes of a pattern
// add their wasted hours under one finding. With a counted window
// (State.Window), an episode over by its start is the warm-up's and left out.
func (st *State) Findings(extra []finding.Finding) []finding.Finding {
	merged := map[string]*finding.Finding{}
	var order []string
	add := func(f finding.Finding) {
		if !st.Window.IsZero() && !f.End.After(st.Window) {
			return
		}
		k := f.Key()
		m, ok := merged[k]
		if !ok {
			c := f
			c.Evidence = copyMap(f.Evidence)
			c.Evidence["episodes"] = 1
			merged[k] = &c
			order = append(order, k)
			return
		}
		if Cumulative(f.Pattern) {
			ep := m.Evidence["episodes"]
			*m = f
			m.Evidence = copyMap(f.Evidence)
			m.Evidence["episodes"] = ep
			return
		}
		if f.Start.Before(m.Start) {
			m.Start = f.Start
		}
		if f.End.After(m.End) {
			m.End = f.End
			m.Evidence = copyMap(f.Evidence)
		}
		m.WastedGPUHours = round(m.WastedGPUHours + f.WastedGPUHours)
		m.Evidence["episodes"]++
	}
	for _, a := range st.Allocs {
		for _, f := range a.Closed {
			add(f)
		}
		for _, p := range schema.AllPatterns {
			if f, ok := a.Open[p]; ok {
				add(carried(a, *f))
			}
		}
	}
	for _, f := range extra {
		add(f)
	}
	out := make([]finding.Finding, 0, len(order))
	for _, k := range order {
		out = append(out, *merged[k])
	}
	Sort(out)
	return out
}

// carried marks an open finding of an allocation whose latest step had no
// data: its clocks are paused, not ended, and whoever acts on it must wait
// for the data to come back (an escalation keeps its episode, so the user
// is not warned again from the first step after an exporter restart). A
// fault is not: it was seen, and a GPU silent after it (fallen off the bus)
// is its consequence, which is what drains the node.
func carried(a *Alloc, f finding.Finding) finding.Finding {
	if !a.Unknown || f.Pattern == schema.GPUFault {
		return f
	}
	f.Evidence = copyMap(f.Evidence)
	f.Evidence[finding.EvidenceUnknown] = 1
	return f
}

// Sort orders findings by GPU-hours wasted, then key, for stable output.
func Sort(fs []finding.Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].WastedGPUHours != fs[j].WastedGPUHours {
			return fs[i].WastedGPUHours > fs[j].WastedGPUHours
		}
		return fs[i].Key() < fs[j].Key()
	})
}

// Prune drops allocations that ended (or went silent) before cutoff, so the
// state of a long-running daemon stays the size of the live fleet.
func (st *State) Prune(cutoff time.Time) {
	for k, a := range st.Allocs {
		if a.LastStep.Before(cutoff) {
			delete(st.Allocs, k)
		}
	}
}

func copyMap(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func round(v float64) float64 { return math.Round(v*1000) / 1000 }

func dur(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	var b strings.Builder
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 || h == 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}
