package detect

import (
	"fmt"
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/schema"
)

// gpu_fault: a hardware or driver XID (NVIDIA's XID catalogue, see
// analyzer/health), a double-bit ECC error (or the row remapped for an
// uncorrectable error) or a row-remap failure on one of
// the job's GPUs. A job that ended within faultEndWindow of it ended of the
// fault (evidence ended_by_fault): not of its own code, so its owner is
// told to resubmit and the admins which GPU. Never waste, never reclaims.
func init() {
	register(schema.GPUFault, Spec{judge: judgeGPUFault, Cumulative: true,
		Advise: func(f *finding.Finding) string {
			what := faultWords(f.Evidence)
			if f.Evidence["ended_by_fault"] > 0 {
				return fmt.Sprintf("The job ended because its GPU %s failed (%s), not because of its code: resubmit it; the admins should check that GPU.", f.GPU, what)
			}
			return fmt.Sprintf("GPU %s reported a hardware fault (%s): the admins should check it; results computed on it since may be wrong.", f.GPU, what)
		}})
}

func faultWords(ev map[string]float64) string {
	switch {
	case ev["xid"] > 0:
		x := health.XID(int(ev["xid"]))
		return fmt.Sprintf("XID %d, %s", x.Code, x.Meaning)
	case ev["row_remap_failure"] > 0:
		return "row remapping failed"
	case ev["ecc_dbe"] > 0:
		return "uncorrectable ECC error"
	case ev["remap_uncorrectable"] > 0:
		return "uncorrectable memory error, its row remapped"
	}
	return "hardware fault"
}

// faulted returns the allocation's GPU with the latest fault.
func faulted(a *Alloc) (string, *GPUState) {
	devs := make([]string, 0, len(a.GPUs))
	for dev := range a.GPUs {
		devs = append(devs, dev)
	}
	sort.Strings(devs)
	var bd string
	var best *GPUState
	for _, dev := range devs {
		g := a.GPUs[dev]
		if g.Health.FaultAt.IsZero() {
			continue
		}
		if best == nil || g.Health.FaultAt.After(best.Health.FaultAt) {
			bd, best = dev, g
		}
	}
	return bd, best
}

func judgeGPUFault(j *judge) *verdict {
	_, g := faulted(j.a)
	if g == nil {
		return nil
	}
	h := &g.Health
	ev := map[string]float64{"ecc_dbe": h.DBE, "remap_uncorrectable": h.RemapUncorr, "pcie_replays": h.PCIeReplays}
	if h.FaultXID > 0 {
		ev["xid"] = float64(h.FaultXID)
		ev["xid_count"] = float64(h.XIDs[h.FaultXID])
	}
	if h.RemapFailed {
		ev["row_remap_failure"] = 1
	}
	return &verdict{from: h.FirstFaultAt, evidence: ev, gpu: g.UUID,
		advice: fmt.Sprintf("GPU %s: %s", g.UUID, faultWords(ev))}
}

// attributeEnd marks a job that ended within faultEndWindow of a fault on
// one of its GPUs as ended by it, judging the fault once more if its last
// steps were unknown (a GPU that fell off the bus leaves them so).
func (d *Detector) attributeEnd(a *Alloc) {
	if !d.faultOn {
		return
	}
	_, g := faulted(a)
	if g == nil || a.LastSeen.Sub(g.Health.FaultAt) > faultEndWindow {
		return
	}
	f := a.Open[schema.GPUFault]
	if f == nil {
		v := judgeGPUFault(d.newJudge(a, a.LastSeen))
		nf := d.base(a, schema.GPUFault)
		nf.Start, nf.End, nf.GPU, nf.Advice = v.from, a.LastSeen, v.gpu, v.advice
		for k, x := range v.evidence {
			nf.Evidence[k] = round(x)
		}
		f = &nf
		a.Open[schema.GPUFault] = f
	}
	f.Evidence["ended_by_fault"] = 1
	f.Evidence["minutes_before_end"] = round(a.LastSeen.Sub(g.Health.FaultAt).Minutes())
	f.Advice += "; the job ended of it"
}

// endedOfFault reports whether an allocation that no device shows any
// more ended of a fault although some of its devices are silent: a GPU
// fell off the bus (or another hardware fault) within faultEndWindow, and
// either another of its GPUs reports without it or the fault took the GPU
// away (XID 79).
func (d *Detector) endedOfFault(a *Alloc, s features.Step, known func(string) bool) bool {
	_, g := faulted(a)
	if g == nil || s.End.Sub(g.Health.FaultAt) > faultEndWindow+s.End.Sub(s.Start) {
		return false
	}
	if g.Health.FaultXID == xidFallenOffBus {
		return true
	}
	for dev := range a.GPUs {
		if known(features.DeviceID(a.Host, dev)) {
			return true
		}
	}
	return false
}

// xidFallenOffBus is NVIDIA's XID 79, "GPU has fallen off the bus".
const xidFallenOffBus = 79
