package detect

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// orphan_process: GPU memory held by a process of no live job. It is found
// per process, outside any allocation, and its waste is counted apart from
// the allocations'.
func init() {
	register(schema.OrphanProcess, Spec{Advise: func(*finding.Finding) string {
		return "A process kept GPU memory after its job ended: make the job kill its whole process group on exit (trap EXIT / use srun), so the next job gets a clean GPU."
	}})
}

// orphans tracks orphaned processes: present in this step or gone (an
// absent series ends the episode, which can only suppress a finding).
func (d *Detector) orphans(st *State, s features.Step) []finding.Finding {
	trackOrphans(st, s)
	if d.cfg.Patterns.OrphanProcess.Disabled {
		return nil
	}
	return d.orphanFindings(st, s.End)
}

// trackOrphans brings st.Orphans up to step s: a process seen again extends
// its episode, a new one starts one, and one not seen ends its own.
func trackOrphans(st *State, s features.Step) {
	seen := map[string]bool{}
	step := s.End.Sub(s.Start)
	for _, o := range s.Orphans {
		k := o.Host + "|" + o.Device + "|" + o.PID
		seen[k] = true
		// The share of the step's scrapes that saw it: a process killed on
		// this evidence must have earned it, not a step's rounding.
		part := step
		if s.ExpectedOf(features.DeviceID(o.Host, o.Device)) > 0 {
			part = time.Duration(s.Share(features.DeviceID(o.Host, o.Device), o.Samples) * float64(step))
		}
		if cur, ok := st.Orphans[k]; ok {
			cur.LastSeen = s.End
			cur.Orphan = o
			cur.Orphaned += part
			continue
		}
		st.Orphans[k] = &OrphanState{Orphan: o, Since: s.End.Add(-part), LastSeen: s.End, Orphaned: part}
	}
	for k := range st.Orphans {
		if !seen[k] {
			delete(st.Orphans, k)
		}
	}
}

// orphanFindings makes one finding per host and job of the orphans that
// have lasted long enough: a job's leftover processes are one mess.
func (d *Detector) orphanFindings(st *State, end time.Time) []finding.Finding {
	c := d.cfg.Patterns.OrphanProcess
	spec, _ := Lookup(schema.OrphanProcess)
	byJob := map[string]*finding.Finding{}
	keys := make([]string, 0, len(st.Orphans))
	for k := range st.Orphans {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o := st.Orphans[k]
		if o.Orphaned < c.MinDuration.D() {
			continue
		}
		job := o.Job
		if job == "" {
			job = "orphan:" + o.Device
		}
		fk := o.Host + "|" + job
		f := byJob[fk]
		if f == nil {
			f = &finding.Finding{Pattern: schema.OrphanProcess, Severity: spec.Severity,
				Action: spec.Action, Job: job, User: o.User, Hostname: o.Host, ModelName: o.Model,
				Start: o.Since, End: end, Evidence: map[string]float64{"threshold_minutes": c.MinDuration.D().Minutes()}}
			byJob[fk] = f
		}
		addOrphan(f, o)
	}
	out := make([]finding.Finding, 0, len(byJob))
	for _, f := range byJob {
		sort.Strings(f.GPUs)
		sort.Ints(f.PIDs)
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out
}

// addOrphan folds one orphaned process into its job's finding.
func addOrphan(f *finding.Finding, o *OrphanState) {
	if !contains(f.GPUs, o.Device) {
		f.GPUs = append(f.GPUs, o.Device)
	}
	var pid int
	if _, err := fmt.Sscanf(o.PID, "%d", &pid); err == nil {
		f.PIDs = append(f.PIDs, pid)
		if f.Commands == nil {
			f.Commands = map[int]string{}
		}
		f.Commands[pid] = o.Command
	}
	if o.Since.Before(f.Start) {
		f.Start = o.Since
	}
	f.WastedGPUHours = round(f.WastedGPUHours + o.Orphaned.Hours())
	f.Evidence["orphan_minutes"] = round(math.Max(f.Evidence["orphan_minutes"], o.Orphaned.Minutes()))
	f.Evidence["processes"]++
	f.Advice = fmt.Sprintf("Process %s (%s) holds GPU memory with no live job: kill it.", o.PID, o.Command)
}
