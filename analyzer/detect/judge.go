package detect

import (
	"math"
	"sort"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// judge is what every detector may read about one allocation at one step:
// the allocation, the thresholds, and the summaries several detectors share.
type judge struct {
	cfg         config.Config
	a           *Alloc
	t           time.Time
	n           float64 // GPUs
	interactive bool
	service     bool // a service, or activity that keeps coming back
	fbMax       float64
	fbTotal     float64
	hist        history
}

// history summarises the per-GPU record for the cumulative patterns.
type history struct {
	idleGPUs, usedGPUs float64
	// idleHeld is the GPU-hours the idle GPUs were held, by share.
	idleHeld        float64
	lowAll, lowAny  bool
	sumRatio, steps float64
	peak            float64
	usesSM          bool
}

func (d *Detector) newJudge(a *Alloc, t time.Time) *judge {
	c := d.cfg.Patterns
	j := &judge{cfg: d.cfg, a: a, t: t, n: float64(len(a.GPUs)), interactive: a.Kind == schema.KindInteractive,
		service: a.Kind == schema.KindService || a.Resumes > 0}
	if a.Kind == "" {
		// The kind is unknown (its owner could not be asked): judged as
		// neither an interactive session nor a batch job, no pattern that
		// only one kind has opens (idle_session, stuck, startup_overhead).
		j.service = true
	}
	for _, g := range a.GPUs {
		j.fbMax = math.Max(j.fbMax, g.FBMaxMiB)
		j.fbTotal = math.Max(j.fbTotal, g.FBTotalMiB)
	}
	h := history{lowAll: true}
	for _, g := range a.GPUs {
		if g.KnownSteps == 0 || g.Undetermined > 0 {
			// Light use is not known of steps whose use could not be
			// told: low utilization would charge them too.
			h.lowAll = false
		}
		if g.KnownSteps == 0 {
			continue
		}
		ratio := float64(g.ActiveSteps) / float64(g.KnownSteps)
		if ratio <= float64(c.OverRequested.MaxActiveRatio) {
			h.idleGPUs++
			h.idleHeld += g.HeldHours
		} else {
			h.usedGPUs++
		}
		mean := g.SumRatio / float64(g.KnownSteps)
		limit := float64(c.LowUtilization.MaxMeanUtilPercent) / 100
		if g.UsesSM {
			limit, h.usesSM = float64(c.LowUtilization.MaxMeanSMActive), true
		}
		if ratio >= 0.5 && mean < limit && g.PeakRatio <= float64(c.LowUtilization.MaxPeakRatio) &&
			g.FBTotalMiB > 0 && g.FBMaxMiB <= float64(c.LowUtilization.MaxMemoryRatio)*g.FBTotalMiB {
			h.lowAny = true
		} else {
			h.lowAll = false
		}
		h.sumRatio += g.SumRatio
		h.steps += float64(g.KnownSteps)
		h.peak = math.Max(h.peak, g.PeakRatio)
	}
	j.hist = h
	return j
}

// since is a run's clock: the known time from its start to the judged
// step, its gaps left out.
func (j *judge) since(from time.Time) time.Duration { return j.a.clock(from, j.t) }

func (d *Detector) base(a *Alloc, p schema.Pattern) finding.Finding {
	s, _ := Lookup(p)
	f := finding.Finding{Pattern: p, Severity: s.Severity, Action: s.Action,
		Job: a.Job, User: a.User, Team: a.Team, Kind: a.Kind, KindSource: a.KindSource, Hostname: a.Host, Cluster: a.Cluster, Scheduler: a.Scheduler,
		Account: a.Account, JobName: a.JobName, Namespace: a.Namespace, Pod: a.Pod, ModelName: a.Model,
		Evidence: map[string]float64{}}
	for dev := range a.GPUs {
		f.GPUs = append(f.GPUs, dev)
	}
	sort.Strings(f.GPUs)
	return f
}

// evaluate runs every registered detector on a at t and updates its open
// findings.
func (d *Detector) evaluate(a *Alloc, t, window time.Time, withdrawn *[]Withdrawal) []finding.Finding {
	j := d.newJudge(a, t)
	hits := map[schema.Pattern]*finding.Finding{}
	var out []finding.Finding
	for _, s := range d.on {
		if s.OneOff && a.Reported[s.Pattern] {
			continue
		}
		v := s.judge(j)
		if v == nil {
			continue
		}
		if s.OneOff {
			if a.Reported == nil {
				a.Reported = map[schema.Pattern]bool{}
			}
			a.Reported[s.Pattern] = true
			if v.quiet {
				continue // judged once, and nothing to report
			}
		}
		clip(v, a, s.Cumulative, t, window)
		f := d.base(a, s.Pattern)
		f.Start, f.End, f.WastedGPUHours, f.Advice = v.from, t, round(v.wasted), v.advice
		if v.action != "" {
			f.Action = v.action
		}
		if v.severity != "" {
			f.Severity = v.severity
		}
		if !v.to.IsZero() {
			f.End = v.to
		}
		f.GPU = v.gpu
		for k, x := range v.evidence {
			f.Evidence[k] = round(x)
		}
		if s.OneOff {
			a.Closed = append(a.Closed, f)
			out = append(out, f)
			continue
		}
		hits[s.Pattern] = &f
	}
	// Update open episodes: a condition that stopped closes its episode.
	for p, f := range a.Open {
		if _, ok := hits[p]; !ok {
			if Cumulative(p) {
				*withdrawn = append(*withdrawn, Withdrawal{Key: f.Key(), Since: a.Start})
			} else {
				a.Closed = append(a.Closed, *f)
			}
			delete(a.Open, p)
		}
	}
	for _, p := range schema.AllPatterns {
		f, ok := hits[p]
		if !ok {
			continue
		}
		if prev, ok := a.Open[p]; ok && !Cumulative(p) && prev.Start.Before(f.Start) {
			f.Start = prev.Start
		}
		a.Open[p] = f
		out = append(out, *f)
	}
	return out
}
