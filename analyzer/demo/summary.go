package demo

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
)

// Reclaim is one job the dry-run would have reclaimed.
type Reclaim struct {
	Job, Hostname, Team, Pattern string
	At                           time.Time
	GPUs                         int
	// FreedGPUHours is the waste after the reclaim: the finding's GPUs
	// times the time from the reclaim to the finding's end.
	FreedGPUHours float64
}

// Reclaims lists the dry-run reclaims of res, with what each would have
// freed, most first.
func (res *Result) Reclaims() []Reclaim {
	byKey := map[string]*finding.Finding{}
	for i := range res.Findings {
		f := &res.Findings[i]
		byKey[f.Key()] = f
	}
	seen := map[string]bool{}
	var out []Reclaim
	for _, e := range res.Audit {
		if e.Step != string(policy.StepReclaim) || e.State != audit.DryRun || !e.DryRun {
			continue
		}
		k := e.Hostname + "|" + e.Job + "|" + e.Pattern
		if seen[k] {
			continue
		}
		seen[k] = true
		r := Reclaim{Job: e.Job, Hostname: e.Hostname, Team: e.Team, Pattern: e.Pattern, At: e.At}
		if f := byKey[k]; f != nil {
			r.GPUs = len(f.GPUs)
			if f.End.After(e.At) {
				r.FreedGPUHours = float64(r.GPUs) * f.End.Sub(e.At).Hours()
			}
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].FreedGPUHours > out[j].FreedGPUHours })
	return out
}

type total struct {
	name  string
	hours float64
	n     int
}

func totals(fs []finding.Finding, key func(*finding.Finding) string) []total {
	m := map[string]*total{}
	for i := range fs {
		k := key(&fs[i])
		if m[k] == nil {
			m[k] = &total{name: k}
		}
		m[k].hours += fs[i].WastedGPUHours
		m[k].n++
	}
	out := make([]total, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].hours != out[j].hours {
			return out[i].hours > out[j].hours
		}
		return out[i].name < out[j].name
	})
	return out
}

// WriteSummary prints what a person reads in ten seconds: the fleet's
// GPU-hours, the waste by pattern and by team, the five worst jobs and what
// the policy would have reclaimed.
func WriteSummary(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("gpuwatch demo: %s scenario, %d nodes, %d GPUs, %s to %s (%s at %s steps), %d analyzer cycles in %s\n",
		res.Scenario, res.Nodes, res.GPUs, res.Origin.UTC().Format("2006-01-02 15:04"), res.End.UTC().Format("2006-01-02 15:04 MST"),
		res.End.Sub(res.Origin), res.Step, res.Cycles, res.Elapsed.Round(100*time.Millisecond))
	p("GPU-hours: %s allocated, %s active, %s wasted (%s of allocated)\n\n", gh(res.AllocatedGPUHours), gh(res.ActiveGPUHours),
		gh(res.WastedGPUHours), pct(res.WastedGPUHours, res.AllocatedGPUHours))

	p("WASTE BY PATTERN\tGPU-HOURS\tFINDINGS\t\n")
	for _, t := range totals(res.Findings, func(f *finding.Finding) string { return string(f.Pattern) }) {
		p("  %s\t%s\t%d\t\n", t.name, gh(t.hours), t.n)
	}
	p("\nWASTE BY TEAM\tGPU-HOURS\tFINDINGS\t\n")
	for _, t := range totals(res.Findings, func(f *finding.Finding) string { return dash(f.Team) }) {
		p("  %s\t%s\t%d\t\n", t.name, gh(t.hours), t.n)
	}

	p("\nWORST JOBS\tGPU-HOURS\tTEAM\tUSER\tHOST\tPATTERNS\t\n")
	type job struct {
		f        *finding.Finding
		hours    float64
		patterns []string
	}
	jobs := map[string]*job{}
	for i := range res.Findings {
		f := &res.Findings[i]
		k := f.Hostname + "|" + f.Job
		if jobs[k] == nil {
			jobs[k] = &job{f: f}
		}
		jobs[k].hours += f.WastedGPUHours
		jobs[k].patterns = append(jobs[k].patterns, string(f.Pattern))
	}
	worst := make([]*job, 0, len(jobs))
	for _, j := range jobs {
		worst = append(worst, j)
	}
	sort.Slice(worst, func(a, b int) bool {
		if worst[a].hours != worst[b].hours {
			return worst[a].hours > worst[b].hours
		}
		return worst[a].f.Job < worst[b].f.Job
	})
	for _, j := range worst[:min(5, len(worst))] {
		sort.Strings(j.patterns)
		p("  %s\t%s\t%s\t%s\t%s\t%s\t\n", jobName(j.f), gh(j.hours), dash(j.f.Team), dash(j.f.User), j.f.Hostname, strings.Join(j.patterns, ","))
	}

	rs := res.Reclaims()
	var freed float64
	var gpus int
	for _, r := range rs {
		freed += r.FreedGPUHours
		gpus += r.GPUs
	}
	checkpoints := 0
	for _, e := range res.Audit {
		if e.Step == string(policy.StepCheckpoint) && e.State == audit.DryRun {
			checkpoints++
		}
	}
	p("\nDRY-RUN: %d warnings and notices recorded; would have sent %d checkpoint signal(s) and reclaimed %d job(s) (%d GPUs), freeing %s GPU-hours\n",
		res.Notifications, checkpoints, len(rs), gpus, gh(freed))
	if len(rs) > 0 {
		p("WOULD RECLAIM\tAT\tGPUS\tFREED GPU-H\tPATTERN\t\n")
		for _, r := range rs[:min(5, len(rs))] {
			p("  %s on %s\t%s\t%d\t%s\t%s\t\n", r.Job, r.Hostname, r.At.UTC().Format("Mon 15:04"), r.GPUs, gh(r.FreedGPUHours), r.Pattern)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	writePlanSummary(w, res.Plan)
	return nil
}

func jobName(f *finding.Finding) string {
	if f.JobName != "" {
		return f.Job + " (" + f.JobName + ")"
	}
	return f.Job
}

func gh(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func pct(a, b float64) string {
	if b <= 0 {
		return "n/a"
	}
	return strconv.FormatFloat(100*a/b, 'f', 1, 64) + "%"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
