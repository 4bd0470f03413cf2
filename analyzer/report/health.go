package report

import (
	"sort"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// HealthRow is one node of the fleet-health ranking: how much of its GPUs'
// used time ran throttled (the straggler and throttled findings'
// throttled_gpu_hours) and how often they faulted (the GPUs' faults of the
// gpu_fault findings, a shared GPU's once), each beside the same figure
// over every node of its model.
type HealthRow struct {
	Hostname string `json:"hostname"`
	Model    string `json:"model"`
	// UsedGPUHours is the node's GPU-active time in the period.
	UsedGPUHours      float64 `json:"used_gpu_hours"`
	ThrottledGPUHours float64 `json:"throttled_gpu_hours"`
	DegradedGPUHours  float64 `json:"degraded_gpu_hours"`
	Stragglers        int     `json:"stragglers"`
	Faults            int     `json:"faults"`
	// ThrottledShare = throttled / used; ModelThrottledShare the same over
	// the model's nodes. FaultsPer1k are faults per 1,000 used GPU-hours.
	ThrottledShare       float64 `json:"throttled_share"`
	ModelThrottledShare  float64 `json:"model_throttled_share"`
	FaultsPer1k          float64 `json:"faults_per_1k_gpu_hours"`
	ModelFaultsPer1k     float64 `json:"model_faults_per_1k_gpu_hours"`
	JobsEndedByGPUFault  int     `json:"jobs_ended_by_gpu_fault"`
	ApplicationXIDFaults int     `json:"application_xids"`
}

// fleetHealth ranks the nodes of the period by throttled GPU-hours, then
// faults; only nodes with a health finding are listed, at most top.
func fleetHealth(usage []store.Usage, fs []finding.Finding, p Period, top int) []HealthRow {
	rows := healthRows{}
	for i := range usage {
		u := &usage[i]
		if !u.Start.Before(p.Start) && u.Start.Before(p.End) {
			rows.row(u.Hostname, u.Model).UsedGPUHours += u.ActiveGPUHours
		}
	}
	listed := rows.addFindings(fs, p)
	out := rows.againstModels(listed)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.ThrottledGPUHours != b.ThrottledGPUHours {
			return a.ThrottledGPUHours > b.ThrottledGPUHours
		}
		if a.Faults != b.Faults {
			return a.Faults > b.Faults
		}
		return a.Hostname < b.Hostname
	})
	if top > 0 && len(out) > top {
		out = out[:top]
	}
	return out
}

// healthRows are the fleet-health rows by host, made on first mention.
type healthRows map[string]*HealthRow

// row returns host's row, taking the model from the first mention that
// names one.
func (rows healthRows) row(host, model string) *HealthRow {
	r := rows[host]
	if r == nil {
		r = &HealthRow{Hostname: host}
		rows[host] = r
	}
	if r.Model == "" {
		r.Model = model
	}
	return r
}

// addFindings counts the health findings' share inside the period into
// their hosts' rows and returns the hosts that had one. Faults are the
// GPUs' (health.GroupFaults): a shared GPU's holders each have a
// gpu_fault finding, and each of their jobs ended by it counts, but the
// GPU faulted once.
func (rows healthRows) addFindings(fs []finding.Finding, p Period) map[string]bool {
	listed := map[string]bool{}
	faults := map[string][]*finding.Finding{}
	for i := range fs {
		f := &fs[i]
		if !f.Pattern.Health() {
			continue
		}
		share := accounting.Clip(f.Start, f.End, p.Start, p.End)
		if share <= 0 {
			continue
		}
		r := rows.row(f.Hostname, f.ModelName)
		switch f.Pattern {
		case schema.Straggler, schema.Throttled:
			r.ThrottledGPUHours += share * f.Evidence["throttled_gpu_hours"]
			r.DegradedGPUHours += share * f.Evidence[schema.EvidenceDegraded]
			if f.Pattern == schema.Straggler {
				r.Stragglers++
			}
		case schema.GPUFault:
			faults[f.Hostname] = append(faults[f.Hostname], f)
			if f.Evidence["ended_by_fault"] > 0 {
				r.JobsEndedByGPUFault++
			}
		case schema.AppXID:
			r.ApplicationXIDFaults++
		}
		listed[f.Hostname] = true
	}
	for host, hf := range faults {
		rows.row(host, "").Faults = health.CountFaults(hf)
	}
	return listed
}

// againstModels returns the listed rows with something to show, each with
// its shares beside the same shares over every node of its model: a node is
// unhealthy against its peers, not against another model's.
func (rows healthRows) againstModels(listed map[string]bool) []HealthRow {
	type peers struct{ used, throttled, faults float64 }
	byModel := map[string]*peers{}
	for _, r := range rows {
		m := byModel[r.Model]
		if m == nil {
			m = &peers{}
			byModel[r.Model] = m
		}
		m.used += r.UsedGPUHours
		m.throttled += r.ThrottledGPUHours
		m.faults += float64(r.Faults)
	}
	var out []HealthRow
	for host, r := range rows {
		if !listed[host] || (r.ThrottledGPUHours == 0 && r.Faults == 0 && r.ApplicationXIDFaults == 0) {
			continue
		}
		m := byModel[r.Model]
		r.ThrottledShare, r.ModelThrottledShare = ratio(r.ThrottledGPUHours, r.UsedGPUHours), ratio(m.throttled, m.used)
		r.FaultsPer1k, r.ModelFaultsPer1k = 1000*ratio(float64(r.Faults), r.UsedGPUHours), 1000*ratio(m.faults, m.used)
		out = append(out, *r)
	}
	return out
}
