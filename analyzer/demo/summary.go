package demo

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/schema"
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

// maxReclaimsShown bounds the summary's list of reclaimed jobs.
const maxReclaimsShown = 5

// onePerJob keeps each job's first reclaim in rs (the one freeing the
// most, rs being in that order): a job reclaimed for a second pattern is
// not a second job, nor are its GPU-hours freed twice.
func onePerJob(rs []Reclaim) []Reclaim {
	seen := map[string]bool{}
	out := rs[:0:0]
	for _, r := range rs {
		if k := r.Hostname + "|" + r.Job; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

// WriteSummary prints what a person reads in ten seconds: the fleet's
// GPU-hours, the waste by pattern and by team, the five worst jobs and what
// the policy would have reclaimed. Every figure is the fleet report's, so
// the terminal, the reports and the web page agree.
func WriteSummary(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("gpuwatch demo: %s scenario, %d nodes, %d GPUs, %s to %s (%s at %s steps), %d analyzer cycles in %s\n",
		res.Scenario, res.Nodes, res.GPUs, res.Origin.UTC().Format("2006-01-02 15:04"), res.End.UTC().Format("2006-01-02 15:04 MST"),
		res.End.Sub(res.Origin), res.Step, res.Cycles, res.Elapsed.Round(100*time.Millisecond))
	fleet := res.Fleet
	if fleet == nil {
		fleet = &report.Report{}
	}
	p("%s\n\n", AccountingLine(fleet.Totals))

	p("WASTE BY PATTERN\tGPU-HOURS\tFINDINGS\t\n")
	for _, r := range fleet.ByPattern {
		p("  %s\t%s\t%d\t\n", r.Pattern, gh(r.WastedGPUHours), r.Findings)
	}
	// Over the limit and orphaned are totals of their own, beside waste.
	count := map[schema.Pattern]int{}
	for i := range res.Findings {
		count[res.Findings[i].Pattern]++
	}
	if h := fleet.Totals.OverLimitGPUHours; h > 0 {
		p("  %s\t%s\t%d\tover the limit, not waste\n", schema.Overlong, gh(h), count[schema.Overlong])
	}
	if h := fleet.Totals.OrphanGPUHours; h > 0 {
		p("  %s\t%s\t%d\torphaned, outside allocated\n", schema.OrphanProcess, gh(h), count[schema.OrphanProcess])
	}
	p("\nWASTE BY TEAM\tGPU-HOURS\tTOP PATTERN\t\n")
	for _, r := range fleet.Teams {
		if r.WastedGPUHours > 0 {
			p("  %s\t%s\t%s\t\n", r.Team, gh(r.WastedGPUHours), dash(string(r.TopPattern)))
		}
	}

	writeHealth(p, res.Findings)

	p("\nWORST JOBS\tGPU-HOURS\tTEAM\tUSER\tHOST\tPATTERNS\t\n")
	for _, j := range fleet.TopJobs[:min(5, len(fleet.TopJobs))] {
		pats := make([]string, len(j.Patterns))
		for i, x := range j.Patterns {
			pats[i] = string(x)
		}
		sort.Strings(pats)
		name := j.Job
		if j.JobName != "" {
			name += " (" + j.JobName + ")"
		}
		p("  %s\t%s\t%s\t%s\t%s\t%s\t\n", name, gh(j.WastedGPUHours), dash(j.Team), dash(j.User), j.Hostname, strings.Join(pats, ","))
	}

	writeReclaims(p, res)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	writePlanSummary(w, res.Plan, res.PlanErr)
	return nil
}

// writeReclaims prints the dry run's count of what the policy would have
// done and the reclaims it lists: the same jobs, one line each.
func writeReclaims(p func(string, ...any), res *Result) {
	rs := onePerJob(res.Reclaims())
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
		shown := rs[:min(maxReclaimsShown, len(rs))]
		head := "WOULD RECLAIM"
		if len(shown) < len(rs) {
			// The count above and the list below are the same jobs: say
			// which part of them is listed.
			head = fmt.Sprintf("WOULD RECLAIM (%d shown of %d, most GPU-hours freed first)", len(shown), len(rs))
		}
		p("%s\tAT\tGPUS\tFREED GPU-H\tPATTERN\t\n", head)
		for _, r := range shown {
			p("  %s on %s\t%s\t%d\t%s\t%s\t\n", r.Job, r.Hostname, r.At.UTC().Format("Mon 15:04"), r.GPUs, gh(r.FreedGPUHours), r.Pattern)
		}
	}
}

// AccountingLine is the fleet report's GPU-hours in the accounting's one
// sentence.
func AccountingLine(t report.Totals) string {
	return accounting.Totals{Allocated: t.AllocatedGPUHours, Used: t.ActiveGPUHours, Wasted: t.WastedGPUHours,
		OverLimit: t.OverLimitGPUHours, Degraded: t.DegradedGPUHours, Orphan: t.OrphanGPUHours}.Line()
}

func gh(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeHealth lists what slowed or ended jobs (never waste): per health
// pattern, the degraded GPU-hours, the findings and the first one found.
func writeHealth(p func(string, ...any), fs []finding.Finding) {
	type row struct {
		degraded float64
		n        int
		first    *finding.Finding
	}
	rows := map[schema.Pattern]*row{}
	for i := range fs {
		f := &fs[i]
		if !f.Pattern.Health() {
			continue
		}
		r := rows[f.Pattern]
		if r == nil {
			r = &row{}
			rows[f.Pattern] = r
		}
		r.n++
		r.degraded += f.Evidence[schema.EvidenceDegraded]
		if r.first == nil || f.Start.Before(r.first.Start) {
			r.first = f
		}
	}
	if len(rows) == 0 {
		return
	}
	p("\nSLOWED OR ENDED BY GPUS\tDEGRADED GPU-H\tFINDINGS\tFIRST\t\n")
	for _, pat := range schema.HealthPatterns {
		r := rows[pat]
		if r == nil {
			continue
		}
		f := r.first
		what := f.Job + " on " + f.Hostname
		switch {
		case f.Evidence["xid"] > 0:
			what += fmt.Sprintf(", XID %d", int(f.Evidence["xid"]))
			if pat == schema.AppXID {
				what += ", the job's own code"
			}
			if f.Evidence["ended_by_fault"] > 0 {
				what += ", ended the job"
			}
		case f.Evidence["slowdown"] > 0:
			what += fmt.Sprintf(", about %.0f%% slower", 100*f.Evidence["slowdown"])
		}
		p("  %s\t%s\t%d\t%s\t\n", pat, gh(r.degraded), r.n, what)
	}
}
