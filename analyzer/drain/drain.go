// Package drain decides when a node whose GPUs keep failing is taken out
// of service: drained in Slurm, cordoned in Kubernetes. It is the pure
// core of that decision (faults and the audit's memory in, steps out); the
// daemon's executor reads the store, audits and calls the actuators.
//
// Only hardware faults count: gpu_fault findings whose XID NVIDIA's
// catalogue gives to the hardware, uncorrectable ECC errors and row-remap
// failures. An application's XID (app_xid) is the job's own code and a
// driver or firmware XID is not the board's; neither ever drains a node.
// A node is taken out once per set of faults: faults up to the one that
// triggered the last drain (real or dry run) never count again, so an
// operator who resumes or uncordons the node is not overruled until the
// node faults again as often as the policy asks.
//
// Faults are counted per GPU, never per holder: the findings of a shared
// GPU's holders (time-slicing, MPS, vGPU, MIG instances) that saw one fault
// are one fault (health.GroupFaults), so a board shared by three pods does
// not pass for three failing boards.
package drain

import (
	"fmt"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Fault is one hardware fault on one GPU of a node, as a gpu_fault
// finding recorded it.
type Fault struct {
	Node      string
	Scheduler string
	// At is when the GPU first faulted (the finding's start).
	At time.Time
	// RowRemap: the GPU's row remapping failed.
	RowRemap bool
	// Finding is the finding that stands for the fault: the first
	// holder's.
	Finding finding.Finding
	// Holders is the number of findings, one per holder of the GPU, that
	// saw this fault (set by Distinct; 0 before).
	Holders int
}

// Hardware reports whether a finding is a hardware fault that may take its
// node out, and if so the fault.
func Hardware(f *finding.Finding) (Fault, bool) {
	if f.Pattern != schema.GPUFault || f.Hostname == "" || f.Start.IsZero() ||
		f.Evidence[finding.EvidenceUnknown] > 0 {
		return Fault{}, false
	}
	ev := f.Evidence
	hw := ev["row_remap_failure"] > 0 || ev["ecc_dbe"] > 0
	if x := int(ev["xid"]); x > 0 && health.XID(x).Owner == health.OwnerHardware {
		hw = true
	}
	if !hw {
		return Fault{}, false
	}
	return Fault{Node: f.Hostname, Scheduler: f.Scheduler, At: f.Start, RowRemap: ev["row_remap_failure"] > 0, Finding: *f}, true
}

// Distinct folds the faults that are one fault of one GPU, its holders'
// findings (health.GroupFaults), into one: the first holder's finding
// stands for it, with its start, and it is a row-remap failure when any
// holder saw the remap fail.
func Distinct(fs []Fault) []Fault {
	ptrs := make([]*finding.Finding, len(fs))
	for i := range fs {
		ptrs[i] = &fs[i].Finding
	}
	groups := health.GroupFaults(ptrs)
	out := make([]Fault, 0, len(groups))
	for _, g := range groups {
		d := fs[g[0]]
		d.Holders = len(g)
		for _, i := range g[1:] {
			d.RowRemap = d.RowRemap || fs[i].RowRemap
		}
		out = append(out, d)
	}
	return out
}

// FindingKey is the audit's key for taking node out: one escalation per
// node, one episode per triggering fault.
func FindingKey(scheduler, node string) string { return "node|" + scheduler + "|" + node }

// Kind of a decision.
type Kind int

const (
	// Act: take the node out (for real or as a dry run).
	Act Kind = iota
	// Note: record once, for this trigger, why the node is not taken out.
	Note
	// Hold: not now (a failed attempt waits for its backoff); nothing written.
	Hold
)

// Reasons of notes and holds.
const (
	ReasonExempt     = "node is exempt (out_of_service.exempt_nodes)"
	ReasonNoActuator = "no actuator takes nodes of this scheduler out of service"
	ReasonBackoff    = "the last attempt failed; waiting for the retry backoff"
	ReasonGaveUp     = "given up after repeated failed attempts"
)

// Decision is what to do about one node.
type Decision struct {
	Kind      Kind
	Node      string
	Scheduler string
	// Trigger is the newest counted fault: the episode of the audit record.
	Trigger Fault
	// Faults is the number of hardware faults counted: GPUs' faults, a
	// shared GPU's once whatever its holders.
	Faults int
	DryRun bool
	Reason string
}

// Input is everything one decision reads.
type Input struct {
	Policy policy.OutOfService
	Retry  policy.Retry
	// Faults within the policy's window, any order, any node, one per
	// finding: Plan folds a shared GPU's holders into one (Distinct).
	Faults []Fault
	// Last is the newest drain record of each node (by FindingKey) in the
	// policy's dry-run mode; absent when the node was never taken out.
	Last map[string]audit.Record
	Now  time.Time
	// Wired tells whether an actuator takes nodes of a scheduler out.
	Wired func(scheduler string) bool
}

// Plan decides, node by node in name order, which nodes are taken out.
// A shared GPU's fault counts once, dated by its first holder's finding,
// before the window is applied: a holder that saw an old fault later does
// not bring it back into the window.
func Plan(in Input) []Decision {
	if !in.Policy.Enabled {
		return nil
	}
	byNode := map[string][]Fault{}
	for _, f := range Distinct(in.Faults) {
		if in.Now.Sub(f.At) > in.Policy.Window || f.At.After(in.Now) {
			continue
		}
		k := FindingKey(f.Scheduler, f.Node)
		byNode[k] = append(byNode[k], f)
	}
	keys := make([]string, 0, len(byNode))
	for k := range byNode {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []Decision
	for _, k := range keys {
		if d, ok := decide(&in, byNode[k], in.Last[k], k); ok {
			out = append(out, d)
		}
	}
	return out
}

func decide(in *Input, faults []Fault, last audit.Record, key string) (Decision, bool) {
	sort.Slice(faults, func(i, j int) bool {
		if !faults[i].At.Equal(faults[j].At) {
			return faults[i].At.Before(faults[j].At)
		}
		return faults[i].Finding.Key() < faults[j].Finding.Key()
	})
	// The faults since the last drain's trigger: an operator's resume is
	// answered only by new faults.
	var counted []Fault
	remap, shared := false, false
	for _, f := range faults {
		if last.Key != "" && !f.At.After(last.Episode) {
			continue
		}
		counted = append(counted, f)
		remap = remap || f.RowRemap
		shared = shared || f.Holders > 1
	}
	d := Decision{Node: faults[0].Node, Scheduler: faults[0].Scheduler, DryRun: in.Policy.DryRun, Faults: len(counted)}
	switch {
	case last.State == audit.Intended:
		// Interrupted or in flight elsewhere: reconcile settles it first.
		return d, false
	case remap && in.Policy.OnRowRemapFailure:
		d.Trigger, d.Reason = counted[len(counted)-1], "row remapping failed on a GPU"
	case len(counted) > 0 && len(counted) >= in.Policy.Faults:
		d.Trigger = counted[len(counted)-1]
		d.Reason = fmt.Sprintf("%d hardware faults on its GPUs within %s (out_of_service.faults %d)", len(counted), in.Policy.Window, in.Policy.Faults)
		if shared {
			d.Reason += "; a shared GPU's holders counted as one fault"
		}
	case last.State == audit.Failed:
		return retry(in, faults, last, d)
	default:
		return d, false
	}
	switch {
	case in.Policy.Exempt(d.Node):
		d.Kind, d.Reason = Note, ReasonExempt
	case in.Wired == nil || !in.Wired(d.Scheduler):
		d.Kind, d.Reason = Note, ReasonNoActuator
	default:
		d.Kind = Act
	}
	return d, true
}

// retry runs a failed attempt again at the same trigger, after its
// backoff, until the retry policy gives up; a trigger that left the
// window is not retried.
func retry(in *Input, faults []Fault, last audit.Record, d Decision) (Decision, bool) {
	found := false
	for _, f := range faults {
		if f.At.Equal(last.Episode) {
			d.Trigger, found = f, true
		}
	}
	if !found {
		return d, false
	}
	d.Faults = 0
	for _, f := range faults {
		if !f.At.After(last.Episode) {
			d.Faults++
		}
	}
	switch {
	case in.Retry.GivesUp(last.Attempts):
		d.Kind, d.Reason = Note, ReasonGaveUp
	case in.Now.Before(last.Finished.Add(in.Retry.Backoff(last.Attempts))):
		d.Kind, d.Reason = Hold, ReasonBackoff
	default:
		d.Kind, d.Reason = Act, "retrying after: "+last.Detail
	}
	return d, true
}
