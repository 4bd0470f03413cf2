package jobview

import (
	"context"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Exprs returns the instant queries of the per-GPU figures over a window
// of length w (run at the window's end), by name. Tests and docs read them.
func Exprs(ref Ref, w time.Duration) map[string]string {
	sel, r := ref.Selector(), "["+rangeOf(w)+"]"
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	o := func(agg, fn string, m *schema.Metric) string {
		return agg + by + "(" + fn + "(" + m.Name + sel + r + "))"
	}
	return map[string]string{
		"samples":     o("sum", "count_over_time", schema.FBUsed),
		"util_mean":   o("avg", "avg_over_time", schema.GPUUtil),
		"util_peak":   o("max", "max_over_time", schema.GPUUtil),
		"sm_mean":     o("avg", "avg_over_time", schema.ProfSMActive),
		"sm_peak":     o("max", "max_over_time", schema.ProfSMActive),
		"mem_peak":    o("max", "max_over_time", schema.FBUsed),
		"mem_free":    o("min", "min_over_time", schema.FBFree),
		"power_mean":  o("avg", "avg_over_time", schema.PowerUsage),
		"energy_mj":   o("sum", "increase", schema.TotalEnergy),
		"cpu_seconds": "sum(increase(" + schema.JobCPUSeconds.Name + ref.JobSelector() + r + "))",
		"holder":      "max by (" + strings.Join([]string{schema.LabelUser, schema.LabelTeam, schema.LabelKind, schema.LabelAccount, schema.LabelJobName, schema.LabelScheduler}, ", ") + ") (max_over_time(" + schema.AllocationInfo.Name + ref.JobSelector() + r + "))",
	}
}

// instant runs the named queries side by side at t. Every failed query is
// named in the error: the view says which figures it lacks and shows the
// rest.
func instant(ctx context.Context, q query.Querier, exprs map[string]string, t time.Time) (map[string]model.Vector, error) {
	names := make([]string, 0, len(exprs))
	for name := range exprs {
		names = append(names, name)
	}
	sort.Strings(names)
	calls := make([]query.Call, len(names))
	for i, name := range names {
		calls[i] = query.Instant(exprs[name], t)
	}
	out := map[string]model.Vector{}
	err := query.FanEach(ctx, q, calls, parallel, func(i int, v model.Value) {
		vec, _ := v.(model.Vector)
		out[names[i]] = vec
	})
	return out, err
}

func byDevice(v model.Vector) map[string]float64 {
	out := map[string]float64{}
	for _, s := range v {
		x := float64(s.Value)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		out[deviceKey(s.Metric)] = x
	}
	return out
}

func ptr(m map[string]float64, k string) *float64 {
	if v, ok := m[k]; ok {
		return &v
	}
	return nil
}

func figures(ctx context.Context, o Options, ref Ref, r *Report, devs []device, w time.Duration) error {
	res, err := instant(ctx, o.Querier, Exprs(ref, w), r.End)
	if err != nil {
		return err
	}
	get := func(name string) map[string]float64 { return byDevice(res[name]) }
	samples, um, up, sm, sp := get("samples"), get("util_mean"), get("util_peak"), get("sm_mean"), get("sm_peak")
	mp, mf, pm, en := get("mem_peak"), get("mem_free"), get("power_mean"), get("energy_mj")
	models := map[string]bool{}
	for _, d := range devs {
		if r.Hostname == "" {
			r.Hostname = d.host
		}
		g := GPU{Device: d.key, UUID: d.uuid, Index: d.index, Model: d.model, MIGProfile: d.prof,
			Samples: int(samples[d.key]), UtilMean: ptr(um, d.key), UtilPeak: ptr(up, d.key),
			SMActiveMean: ptr(sm, d.key), SMActivePeak: ptr(sp, d.key), MemPeakMiB: ptr(mp, d.key), PowerMeanW: ptr(pm, d.key)}
		if g.MemPeakMiB != nil {
			if free, ok := mf[d.key]; ok {
				total := *g.MemPeakMiB + free
				g.MemTotalMiB = &total
				if total > 0 {
					share := *g.MemPeakMiB / total
					g.MemPeakShare = &share
				}
			}
		}
		if e, ok := en[d.key]; ok {
			kwh := e / mJPerKWh
			g.EnergyKWh, g.EnergyFrom = &kwh, "counter"
		} else if g.PowerMeanW != nil {
			kwh := *g.PowerMeanW * r.DurationHours / 1000
			g.EnergyKWh, g.EnergyFrom = &kwh, "power"
		}
		if d.model != "" && !models[d.model] {
			models[d.model] = true
			r.Models = append(r.Models, d.model)
		}
		r.GPUs = append(r.GPUs, g)
	}
	if v := res["cpu_seconds"]; len(v) > 0 && !math.IsNaN(float64(v[0].Value)) {
		c := &CPU{Seconds: float64(v[0].Value)}
		if s := r.End.Sub(r.Start).Seconds(); s > 0 {
			c.MeanCores = c.Seconds / s
		}
		r.CPU = c
	}
	if v := res["holder"]; len(v) > 0 {
		m := v[0].Metric
		r.User, r.Account, r.JobName = string(m[schema.LabelUser]), string(m[schema.LabelAccount]), string(m[schema.LabelJobName])
		r.Kind = string(m[schema.LabelKind])
		if t := string(m[schema.LabelTeam]); t != "" {
			r.Team = t
		}
		if s := string(m[schema.LabelScheduler]); s != "" {
			r.Scheduler = s
		}
	}
	return nil
}
