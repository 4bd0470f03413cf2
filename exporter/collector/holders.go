package collector

import (
	"sort"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// MaxHoldersPerDevice bounds the gpuwatch_holder_* series of one device. A
// time-sliced GPU has as many holders as replicas the device plugin
// advertises (tens at most); the bound keeps a misconfigured node from
// publishing without limit. Holders past it are counted in
// gpuwatch_exporter_holders_dropped_total.
const MaxHoldersPerDevice = 64

// holderUse is one holder's use of one device, summed over its processes.
type holderUse struct {
	job   string
	alloc *source.Allocation // nil for a holder known only by its processes (an orphan's job)
	use   source.ProcessUse
	mem   uint64
}

// holderUses sums a device's processes per holder. Every allocation of the
// device is a holder, in allocation order, with zero use when none of its
// processes ran; holders known only from processes follow, sorted by job.
// Processes of no job are left out: they cannot be split to a tenant.
func holderUses(allocs []source.Allocation, procs []*source.Process) []holderUse {
	out := make([]holderUse, 0, len(allocs))
	at := make(map[string]int, len(allocs))
	for i := range allocs {
		job := allocs[i].JobID()
		if _, seen := at[job]; seen || job == "" {
			continue // two containers of one pod: one holder
		}
		at[job] = len(out)
		out = append(out, holderUse{job: job, alloc: &allocs[i]})
	}
	firstExtra := len(out)
	for _, p := range procs {
		if p.Job == "" {
			continue
		}
		i, ok := at[p.Job]
		if !ok {
			i = len(out)
			at[p.Job] = i
			out = append(out, holderUse{job: p.Job})
		}
		h := &out[i]
		h.mem += p.MemoryBytes
		if p.Use != nil {
			h.use.SM += p.Use.SM
			h.use.Memory += p.Use.Memory
			h.use.Encoder += p.Use.Encoder
			h.use.Decoder += p.Use.Decoder
		}
	}
	extra := out[firstExtra:]
	sort.Slice(extra, func(a, b int) bool { return extra[a].job < extra[b].job })
	return out
}

// renderHolders publishes the per-holder series of a device whose source
// read each process's own use; it returns how many holders the cap left out.
func (r *renderer) renderHolders(identity []*dto.LabelPair, allocs []source.Allocation, procs []*source.Process) int {
	holders := holderUses(allocs, procs)
	dropped := 0
	if len(holders) > MaxHoldersPerDevice {
		dropped = len(holders) - MaxHoldersPerDevice
		holders = holders[:MaxHoldersPerDevice]
	}
	for i := range holders {
		h := &holders[i]
		base := identity
		if h.alloc != nil {
			base = r.with(identity, []string{schema.LabelPod, schema.LabelNamespace, schema.LabelHPCJob},
				h.alloc.Pod, h.alloc.Namespace, h.alloc.HPCJob)
		}
		labels := r.with(base, []string{schema.LabelJob}, h.job)
		values := [...]float64{ratio(h.use.SM), ratio(h.use.Memory), ratio(h.use.Encoder), ratio(h.use.Decoder), float64(h.mem)}
		for j, m := range schema.HolderUseMetrics {
			r.add(m, labels, values[j])
		}
	}
	return dropped
}

// ratio turns NVML's percent into a 0-1 ratio. Samples of one holder's
// processes are averaged over slightly different windows, so their sum can
// pass 100 by a little: it is capped at the whole device.
func ratio(percent float64) float64 {
	if percent > 100 {
		percent = 100
	}
	return percent / 100
}
