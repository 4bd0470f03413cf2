package health

import (
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// A shared GPU's fault is one fault. Time-slicing, MPS and vGPU give a GPU
// several holders and MIG splits it into instances; when the board faults
// every holder's series show the XID or the ECC error, and the detector
// gives each holder its own gpu_fault finding: each job was hit and its
// owner is told. The board faulted once all the same, so whatever counts
// faults (taking a node out of service, the fleet report's totals, the
// analyzer's fault metric) counts GroupFaults' groups, never findings.

// unknownGPU stands for the GPU of a fault finding that names none (or
// several): FaultDeviceOf gives every such finding of a host the same
// device, so faults without a UUID count at most once per episode on
// their node.
const unknownGPU = "?"

// FaultDevice is the physical GPU a gpu_fault finding is about: its host
// and its GPU's UUID, lower-cased. Holders' findings are one fault only
// when their FaultDevices are equal (GroupFaults).
type FaultDevice struct{ Host, GPU string }

// FaultDeviceOf is the one definition of which GPU a fault is on. A MIG
// instance ("<uuid>/<gi>", the device plugin's older id
// "MIG-GPU-<uuid>/<gi>/<ci>") and a time-slicing replica ("<uuid>::<n>")
// are their GPU: XIDs, ECC errors and row remapping are the board's, and
// every instance and replica of it reports them. A finding that names no
// GPU falls back on its allocation's GPUs when they are all one board,
// and is otherwise its host's unknown GPU: a fact that cannot be had makes
// the count smaller, never larger. A MIG UUID ("MIG-<uuid>") does not name
// its parent GPU and stays a device of its own.
func FaultDeviceOf(f *finding.Finding) FaultDevice {
	gpu := boardOf(f.GPU)
	if gpu == "" {
		gpu = onlyBoard(f.GPUs)
	}
	if gpu == "" {
		gpu = unknownGPU
	}
	return FaultDevice{f.Hostname, gpu}
}

// boardOf is the GPU a device id names ("" for none).
func boardOf(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if i := strings.Index(id, "::"); i >= 0 {
		id = id[:i]
	}
	if rest, ok := strings.CutPrefix(id, "mig-gpu-"); ok {
		id = "gpu-" + rest
	}
	if i := strings.IndexByte(id, '/'); i >= 0 {
		id = id[:i]
	}
	return id
}

// onlyBoard is the one GPU all of ids are on, "" when they name none or
// several.
func onlyBoard(ids []string) string {
	one := ""
	for _, id := range ids {
		b := boardOf(id)
		if b == "" || (one != "" && b != one) {
			return ""
		}
		one = b
	}
	return one
}

// faultGroup is one fault: the findings of its holders and the span they
// cover together.
type faultGroup struct {
	dev      FaultDevice
	from, to time.Time
	members  []int
}

// GroupFaults groups the gpu_fault findings of fs (any other finding is
// left out) into faults, as indices into fs: the findings of one
// FaultDeviceOf whose spans (Start to End) overlap or touch are its holders
// seeing one fault, however the holders came and went; a fault on a
// device no finding was open on since is a new fault. A finding that
// names no GPU joins a fault of a known GPU of its host that it overlaps.
// Each group lists its findings by start, then key: the first stands for
// the fault. Groups come in the order of their first findings.
func GroupFaults(fs []*finding.Finding) [][]int {
	idx := make([]int, 0, len(fs))
	for i, f := range fs {
		if f != nil && f.Pattern == schema.GPUFault {
			idx = append(idx, i)
		}
	}
	devs := make([]FaultDevice, len(fs))
	for _, i := range idx {
		devs[i] = FaultDeviceOf(fs[i])
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := devs[idx[a]], devs[idx[b]]
		if x != y {
			return x.Host < y.Host || (x.Host == y.Host && x.GPU < y.GPU)
		}
		return before(fs, idx[a], idx[b])
	})
	var groups []*faultGroup
	for _, i := range idx {
		f := fs[i]
		to := f.End
		if to.Before(f.Start) {
			to = f.Start
		}
		if n := len(groups); n > 0 && groups[n-1].dev == devs[i] && !f.Start.After(groups[n-1].to) {
			groups[n-1].add(i, to)
			continue
		}
		groups = append(groups, &faultGroup{dev: devs[i], from: f.Start, to: to, members: []int{i}})
	}
	groups = joinUnknown(groups)
	out := make([][]int, len(groups))
	for k, g := range groups {
		sort.SliceStable(g.members, func(a, b int) bool { return before(fs, g.members[a], g.members[b]) })
		out[k] = g.members
	}
	sort.SliceStable(out, func(a, b int) bool { return before(fs, out[a][0], out[b][0]) })
	return out
}

// CountFaults is the number of faults among fs: GroupFaults' groups.
func CountFaults(fs []*finding.Finding) int { return len(GroupFaults(fs)) }

func (g *faultGroup) add(i int, to time.Time) {
	g.members = append(g.members, i)
	if to.After(g.to) {
		g.to = to
	}
}

// joinUnknown folds each fault of a host's unknown GPU into a fault of a
// known GPU of that host that it overlaps, if there is one: a holder
// whose series lost the UUID saw that fault, not another.
func joinUnknown(groups []*faultGroup) []*faultGroup {
	var known, unknown []*faultGroup
	for _, g := range groups {
		if g.dev.GPU == unknownGPU {
			unknown = append(unknown, g)
		} else {
			known = append(known, g)
		}
	}
	out := known
	for _, u := range unknown {
		if k := overlapping(known, u); k != nil {
			k.members = append(k.members, u.members...)
			continue
		}
		out = append(out, u)
	}
	return out
}

// overlapping is the first of gs on u's host whose span meets u's.
func overlapping(gs []*faultGroup, u *faultGroup) *faultGroup {
	for _, g := range gs {
		if g.dev.Host == u.dev.Host && !u.from.After(g.to) && !g.from.After(u.to) {
			return g
		}
	}
	return nil
}

// before orders findings by start, then key, then position.
func before(fs []*finding.Finding, x, y int) bool {
	a, b := fs[x], fs[y]
	if !a.Start.Equal(b.Start) {
		return a.Start.Before(b.Start)
	}
	if ka, kb := a.Key(), b.Key(); ka != kb {
		return ka < kb
	}
	return x < y
}
