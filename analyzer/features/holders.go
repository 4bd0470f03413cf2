package features

import "strings"

// A shared GPU (time-slicing, MPS) has several holders at once, and its
// device counters are the sum of all their use. The data shows the
// holders in one of three ways:
//   - gpuwatch's exporter names them all, joined with commas, in the
//     device series' pod (namespace) or hpc_job label, and publishes each
//     holder's own use in gpuwatch_holder_* where the driver reads it;
//   - dcgm-exporter with KUBERNETES_VIRTUAL_GPUS copies every device
//     series once per replica (a vgpu label) under each holder's labels,
//     each copy carrying the device's totals, never the holder's own use;
//   - a joined label without gpuwatch_holder_* (MIG instances, old
//     drivers, series thinned to dcgm-exporter's families).
// Each holder becomes a row of its own, its share of the device's samples
// (so that the accounting splits the device among them, once), told how
// many holders the device had (GPU.Holders) and, where the exporter read
// it, given its own use (GPU.Own).

// OwnUse is one holder's own use of a device over a step.
type OwnUse struct {
	// SM is the mean share of the device's SM time its processes used
	// (0-1, NVML's per-process SM utilization summed per holder).
	HasSM bool
	SM    float64
	// MemoryMiB is the peak of the GPU memory its processes held.
	HasMemory bool
	MemoryMiB float64
	merged    int // SM series merged (an exporter restarted mid-step)
}

// addOwn adds one sample of a holder's own use to own (by DeviceID, then
// job). Use of no allocation's holder (a process of a job the node no
// longer runs) is left out: it splits no allocation's share.
func addOwn(own map[string]map[string]*OwnUse, f feature, id GPU, val float64) {
	if id.Job == "" {
		return
	}
	d := DeviceID(id.Host, id.Device)
	if own[d] == nil {
		own[d] = map[string]*OwnUse{}
	}
	u := own[d][id.Job]
	if u == nil {
		u = &OwnUse{}
		own[d][id.Job] = u
	}
	switch f {
	case fOwnSM:
		u.SM = (u.SM*float64(u.merged) + val) / float64(u.merged+1)
		u.merged++
		u.HasSM = true
	case fOwnMem:
		u.MemoryMiB, u.HasMemory = max(u.MemoryMiB, val/(1<<20)), true
	}
}

// splitShared returns the step's rows (by DeviceID|job) with every row
// that names several holders (a joined label) replaced by one row per
// holder, and each row of a holder with its own use given it. A joined
// row's holders are those of its own-use series where there are any,
// else those its labels name unambiguously (a list of jobs, or of pods of
// one namespace); a joined row neither tells apart stays as it is.
func splitShared(rows map[string]*GPU, own map[string]map[string]*OwnUse) map[string]*GPU {
	out := make(map[string]*GPU, len(rows))
	put := func(k string, g *GPU) {
		if prev := out[k]; prev != nil {
			// One holder in two rows of a step: alone, then joined by
			// another (or the reverse). Its samples add up.
			prev.Samples += g.Samples
			prev.Holders = max(prev.Holders, g.Holders)
			return
		}
		out[k] = g
	}
	for k, g := range rows {
		d := DeviceID(g.Host, g.Device)
		members := holdersOf(g, own[d])
		if len(members) == 0 {
			if u := own[d][g.Job]; u != nil {
				g.Own, g.HasOwn = *u, true
				g.Holders = max(g.Holders, len(own[d]))
			}
			put(k, g)
			continue
		}
		for _, job := range members {
			c := *g
			c.setHolder(job)
			c.Samples = g.Samples / float64(len(members))
			c.Holders = len(members)
			if u := own[d][job]; u != nil {
				c.Own, c.HasOwn = *u, true
			}
			put(d+"|"+job, &c)
		}
	}
	return out
}

// holdersOf is the holders a row names when it names several (a joined
// label), nil when it names one or cannot be told apart. own is the
// device's holders with their own use: where there are any, the row's
// holders are those of them its labels name.
func holdersOf(g *GPU, own map[string]*OwnUse) []string {
	var named []string
	exact := true
	switch {
	case strings.Contains(g.HPCJob, ","):
		named = splitList(g.HPCJob)
	case strings.Contains(g.Pod, ","):
		nss := splitList(g.NS)
		// Pods of several namespaces, joined apart: any pairing may be
		// the holder, the own-use series say which.
		exact = len(nss) == 1
		for _, ns := range nss {
			for _, pod := range splitList(g.Pod) {
				named = append(named, ns+"/"+pod)
			}
		}
	default:
		return nil
	}
	if len(own) == 0 {
		if !exact {
			return nil
		}
		return named
	}
	var members []string
	for _, job := range named {
		if own[job] != nil {
			members = append(members, job)
		}
	}
	return members
}

// splitList splits a joined label value into its ids, leaving out the
// ",+N" the exporter writes for the ids that did not fit.
func splitList(v string) []string {
	var out []string
	for _, id := range strings.Split(v, ",") {
		if id != "" && !strings.HasPrefix(id, "+") {
			out = append(out, id)
		}
	}
	return out
}

// setHolder makes g one holder's row: job is an hpc_job id, or
// namespace/pod.
func (g *GPU) setHolder(job string) {
	if g.HPCJob != "" {
		g.HPCJob = job
	} else {
		g.NS, g.Pod, _ = strings.Cut(job, "/")
	}
	g.setJob()
}

// countHolders sets each row's Holders to its device's in the step: the
// most any row of it counted (a joined label's holders, the own-use
// series'), or the replicas dcgm-exporter copied its series to (rows with
// a vgpu label), at least one for a held device.
func countHolders(gs []GPU) {
	most := map[string]int{}
	replicas := map[string]int{}
	for i := range gs {
		g := &gs[i]
		if g.Job == "" {
			continue
		}
		d := DeviceID(g.Host, g.Device)
		most[d] = max(most[d], g.Holders, 1)
		if g.replica {
			replicas[d]++
		}
	}
	for i := range gs {
		g := &gs[i]
		if g.Job != "" {
			g.Holders = max(most[DeviceID(g.Host, g.Device)], replicas[DeviceID(g.Host, g.Device)])
		}
	}
}
