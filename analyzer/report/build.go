package report

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Data is what reports read from the store.
type Data interface {
	UsageBetween(ctx context.Context, from, to time.Time) ([]store.Usage, error)
	FindingsBetween(ctx context.Context, from, to time.Time) ([]finding.Finding, error)
}

// Builder turns stored intervals and findings into reports.
type Builder struct {
	Data    Data
	Config  *Config
	Actions ActionLog // nil: the fleet report says actions are not available
	Planner Planner   // nil: no capacity planner section
	Now     func() time.Time
}

// noTeam labels usage that carries no team.
const noTeam = "(no team)"

// Build makes one report: a team's, or the fleet's when team is "".
func (b *Builder) Build(ctx context.Context, p Period, team string) (*Report, error) {
	var teams []string
	if team != "" {
		teams = []string{team}
	}
	rs, fleet, err := b.BuildAll(ctx, p, teams, team == "")
	if err != nil {
		return nil, err
	}
	if team == "" {
		return fleet, nil
	}
	return rs[team], nil
}

// BuildAll makes the reports of teams (and the fleet report when admin is
// set) from one read of the period: a week is a sum of stored intervals.
func (b *Builder) BuildAll(ctx context.Context, p Period, teams []string, admin bool) (map[string]*Report, *Report, error) {
	cfg := b.Config
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	usage, err := b.Data.UsageBetween(ctx, p.Start, p.End)
	if err != nil {
		return nil, nil, fmt.Errorf("report %s: %w", p.Label, err)
	}
	findings, err := accounting.Findings(ctx, b.Data, p.Start, p.End)
	if err != nil {
		return nil, nil, fmt.Errorf("report %s: %w", p.Label, err)
	}
	days := p.Days()
	aggs, fleet := b.aggregate(p, days, usage, findings, teams, admin)
	trend, err := b.trend(ctx, p, teams, admin)
	if err != nil {
		return nil, nil, err
	}
	gen := now().In(cfg.Location())
	planned, planErr := b.planFor(ctx, p)
	base := func(team string, a *agg) *Report {
		r := &Report{Team: team, Period: p, TimeZone: cfg.TimeZone, GeneratedAt: gen, Currency: cfg.Currency, Priced: cfg.Priced()}
		r.Planner = plannerSection(planned, planErr, team)
		a.fill(r, days, cfg, p)
		r.FleetShare = ratio(a.alloc, fleet.alloc)
		r.FleetWasteShare = ratio(a.wasted, fleet.wasted)
		r.Trend = append(trend[team], TrendRow{Label: p.Label, AllocatedGPUHours: a.alloc, ActiveGPUHours: a.active,
			WastedGPUHours: a.wasted, WastedShare: ratio(a.wasted, a.alloc)})
		return r
	}
	out := make(map[string]*Report, len(teams))
	for _, t := range teams {
		a := aggs[t]
		if a == nil {
			a = newAgg(len(days))
		}
		r := base(t, a)
		r.Link = cfg.link(cfg.Grafana.TeamDashboard, p, "team", t)
		out[t] = r
	}
	if !admin {
		return out, nil, nil
	}
	fr := base("", fleet)
	fr.Link = cfg.link(cfg.Grafana.TeamDashboard, p)
	fr.FleetHealth = fleetHealth(usage, findings, p, cfg.Top)
	fr.Teams = teamRows(cfg, p, aggs, fleet)
	b.actions(ctx, p, fr)
	return out, fr, nil
}

// aggregate sums the period's usage and priced waste into the fleet's
// aggregate and, for the teams asked for (every team when admin is set),
// each team's.
func (b *Builder) aggregate(p Period, days []Period, usage []store.Usage, findings []finding.Finding, teams []string, admin bool) (map[string]*agg, *agg) {
	cfg := b.Config
	want := map[string]bool{}
	for _, t := range teams {
		want[t] = true
	}
	aggs := map[string]*agg{}
	get := func(team string) *agg {
		a := aggs[team]
		if a == nil {
			a = newAgg(len(days))
			aggs[team] = a
		}
		return a
	}
	fleet := newAgg(len(days))
	book := accounting.Build(p.Start, p.End, usage, findings)
	models := map[string]string{} // host|job -> model, to price findings
	for i := range usage {
		u := &usage[i]
		team := teamOf(u.Team)
		models[u.Hostname+"|"+u.Job] = u.Model
		d := dayIndex(days, u.Start)
		price := cfg.PriceFor(u.Model)
		used := u.ActiveGPUHours * book.UsedShare(u.Hostname, u.Job)
		fleet.addUsage(u, used, d, price)
		if admin || want[team] {
			get(team).addUsage(u, used, d, price)
		}
	}
	for _, al := range book.Allocations {
		row, ok := sharedRow(al)
		if !ok {
			continue
		}
		fleet.shared = append(fleet.shared, row)
		if team := teamOf(al.Team); admin || want[team] {
			get(team).shared = append(get(team).shared, row)
		}
	}
	for i := range book.Entries {
		e := &book.Entries[i]
		f := e.Finding
		team := teamOf(f.Team)
		model := f.ModelName
		if model == "" {
			model = models[f.Hostname+"|"+f.Job]
		}
		price := cfg.PriceFor(model)
		spread := spreadOverDays(f, e.Wasted, days)
		fleet.addEntry(e, price, model, spread)
		if admin || want[team] {
			get(team).addEntry(e, price, model, spread)
		}
	}
	return aggs, fleet
}

// teamRows ranks the teams of the fleet report by GPU-hours wasted, each
// with its most wasteful pattern.
func teamRows(cfg *Config, p Period, aggs map[string]*agg, fleet *agg) []TeamRow {
	var rows []TeamRow
	for name, a := range aggs {
		if name == noTeam && a.empty() {
			// Only orphaned processes (no live job, so no team): their
			// hours are the fleet's orphan total, and a team row of zeros
			// says nothing.
			continue
		}
		row := TeamRow{Team: name, AllocatedGPUHours: a.alloc, ActiveGPUHours: a.active, WastedGPUHours: a.wasted,
			WastedShare: ratio(a.wasted, a.alloc), FleetShare: ratio(a.alloc, fleet.alloc), Cost: a.cost, WastedCost: a.wastedCost,
			Link: cfg.link(cfg.Grafana.TeamDashboard, p, "team", name)}
		best := 0.0
		for pat, pa := range a.patterns {
			if pa.hours > best || (pa.hours == best && pat < row.TopPattern) {
				best, row.TopPattern = pa.hours, pat
			}
		}
		rows = append(rows, row)
	}
	for _, t := range cfg.TeamNames() { // configured teams that used nothing still show
		if aggs[t] == nil {
			rows = append(rows, TeamRow{Team: t, Link: cfg.link(cfg.Grafana.TeamDashboard, p, "team", t)})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.WastedGPUHours != b.WastedGPUHours {
			return a.WastedGPUHours > b.WastedGPUHours
		}
		return a.Team < b.Team
	})
	return rows
}

// actions adds the period's actions to the fleet report, or a note saying
// why there are none.
func (b *Builder) actions(ctx context.Context, p Period, fr *Report) {
	switch {
	case b.Actions == nil:
		fr.ActionsNote = "No action log is configured for this report."
	default:
		acts, err := b.Actions.ActionsBetween(ctx, p.Start, p.End)
		switch {
		case err != nil:
			fr.ActionsNote = "The action log could not be read: " + err.Error()
		default:
			fr.Actions = acts
			if len(acts) == 0 {
				fr.ActionsNote = "No actions were taken in this period."
			}
		}
	}
}

// trend sums the previous periods per team (and the fleet under ""), one
// period at a time so memory stays at one period's rows.
func (b *Builder) trend(ctx context.Context, p Period, teams []string, admin bool) (map[string][]TrendRow, error) {
	n := b.Config.TrendWeeks
	if p.Kind == Day {
		n = 7
	}
	periods := make([]Period, n)
	q := p
	for i := n - 1; i >= 0; i-- {
		q = q.Prev()
		periods[i] = q
	}
	keys := append([]string{}, teams...)
	if admin {
		keys = append(keys, "")
	}
	out := map[string][]TrendRow{}
	var totals [][]store.Usage
	if ut, ok := b.Data.(usageTotaler); ok && n > 0 {
		bounds := make([]time.Time, 0, n+1)
		for _, q := range periods {
			bounds = append(bounds, q.Start)
		}
		bounds = append(bounds, periods[n-1].End)
		var err error
		if totals, err = ut.UsageTotals(ctx, bounds); err != nil {
			return nil, fmt.Errorf("report trend: %w", err)
		}
	}
	for i, q := range periods {
		var usage []store.Usage
		if totals != nil {
			usage = totals[i]
		} else {
			var err error
			if usage, err = b.Data.UsageBetween(ctx, q.Start, q.End); err != nil {
				return nil, fmt.Errorf("report trend %s: %w", q.Label, err)
			}
		}
		findings, err := accounting.Findings(ctx, b.Data, q.Start, q.End)
		if err != nil {
			return nil, fmt.Errorf("report trend %s: %w", q.Label, err)
		}
		rows := map[string]*accounting.Totals{}
		for _, k := range keys {
			rows[k] = &accounting.Totals{}
		}
		book := accounting.Build(q.Start, q.End, usage, findings)
		for _, a := range book.Allocations {
			for _, k := range []string{teamOf(a.Team), ""} {
				if r := rows[k]; r != nil {
					r.Allocated += a.Allocated
					r.Used += a.Used
					r.Wasted += a.Wasted
				}
			}
		}
		for _, k := range keys {
			r := rows[k]
			out[k] = append(out[k], TrendRow{Label: q.Label, AllocatedGPUHours: r.Allocated, ActiveGPUHours: r.Used,
				WastedGPUHours: r.Wasted, WastedShare: r.WastedShare()})
		}
	}
	return out, nil
}

type agg struct {
	alloc, active, cost, wasted, wastedCost float64
	overLimit, orphan, degraded             float64
	daily                                   []DayRow
	users                                   map[string]*UserRow
	jobs                                    map[string]*JobRow
	jobIDs                                  map[string]bool
	patterns                                map[schema.Pattern]*patAgg
	findings                                []adviceItem
	shared                                  []SharedRow
}

type patAgg struct {
	hours, cost float64
	n           int
}

type adviceItem struct {
	f *finding.Finding
	w float64
}

// empty reports whether the aggregate has nothing a team row shows: no
// hours allocated, used or wasted, no cost and no pattern.
func (a *agg) empty() bool {
	return a.alloc == 0 && a.active == 0 && a.wasted == 0 && a.cost == 0 && len(a.patterns) == 0
}

func newAgg(days int) *agg {
	return &agg{daily: make([]DayRow, days), users: map[string]*UserRow{}, jobs: map[string]*JobRow{},
		jobIDs: map[string]bool{}, patterns: map[schema.Pattern]*patAgg{}}
}

func (a *agg) user(name, team string) *UserRow {
	u := a.users[name]
	if u == nil {
		u = &UserRow{User: name, Team: team}
		a.users[name] = u
	}
	return u
}

// addUsage counts an interval; used is its active time less what the
// accounting took out as waste.
func (a *agg) addUsage(u *store.Usage, used float64, day int, price float64) {
	a.alloc += u.AllocatedGPUHours
	a.active += used
	a.cost += u.AllocatedGPUHours * price
	if day >= 0 {
		a.daily[day].AllocatedGPUHours += u.AllocatedGPUHours
		a.daily[day].ActiveGPUHours += used
	}
	us := a.user(u.User, teamOf(u.Team))
	us.AllocatedGPUHours += u.AllocatedGPUHours
	us.ActiveGPUHours += used
	a.jobIDs[u.Hostname+"|"+u.Job] = true
}

// addEntry counts a finding's part of the accounting: over-limit and
// orphaned GPU-hours are totals of their own, waste is split by pattern,
// user, job and day.
func (a *agg) addEntry(e *accounting.Entry, price float64, model string, spread []float64) {
	a.overLimit += e.OverLimit
	a.degraded += e.Degraded
	a.orphan += e.Orphan
	if e.Wasted > 0 {
		a.addFinding(e.Finding, e.Wasted, price, model, spread)
	}
}

func (a *agg) addFinding(f *finding.Finding, w, price float64, model string, spread []float64) {
	a.wasted += w
	a.wastedCost += w * price
	for i, s := range spread {
		a.daily[i].WastedGPUHours += s
	}
	pa := a.patterns[f.Pattern]
	if pa == nil {
		pa = &patAgg{}
		a.patterns[f.Pattern] = pa
	}
	pa.hours += w
	pa.cost += w * price
	pa.n++
	us := a.user(f.User, teamOf(f.Team))
	us.WastedGPUHours += w
	us.WastedCost += w * price
	key := f.Hostname + "|" + f.Job
	j := a.jobs[key]
	if j == nil {
		j = &JobRow{Job: f.Job, JobName: f.JobName, User: f.User, Team: teamOf(f.Team), Hostname: f.Hostname, Model: model, GPUs: len(f.GPUs)}
		a.jobs[key] = j
	}
	if !containsPattern(j.Patterns, f.Pattern) {
		j.Patterns = append(j.Patterns, f.Pattern)
	}
	j.GPUs = max(j.GPUs, len(f.GPUs))
	j.WastedGPUHours += w
	j.WastedCost += w * price
	a.findings = append(a.findings, adviceItem{f: f, w: w})
}

// fill copies the aggregate into r, sorted and cut to the configured top.
func (a *agg) fill(r *Report, days []Period, cfg *Config, p Period) {
	r.Totals = Totals{AllocatedGPUHours: a.alloc, ActiveGPUHours: a.active, IdleGPUHours: max(0, a.alloc-a.active),
		WastedGPUHours: a.wasted, OverLimitGPUHours: a.overLimit, DegradedGPUHours: a.degraded, OrphanGPUHours: a.orphan, WastedShare: ratio(a.wasted, a.alloc), Cost: a.cost, WastedCost: a.wastedCost,
		Jobs: len(a.jobIDs), Users: len(a.users)}
	for i := range a.daily {
		a.daily[i].Date = days[i].Label
	}
	r.Daily = a.daily
	for _, pat := range schema.Patterns {
		if pa := a.patterns[pat]; pa != nil {
			r.ByPattern = append(r.ByPattern, PatternRow{Pattern: pat, Label: PatternLabel(pat), WastedGPUHours: pa.hours,
				Share: ratio(pa.hours, a.wasted), WastedCost: pa.cost, Findings: pa.n})
		}
	}
	for pat, pa := range a.patterns { // patterns newer than this build
		if !pat.Valid() {
			r.ByPattern = append(r.ByPattern, PatternRow{Pattern: pat, Label: string(pat), WastedGPUHours: pa.hours,
				Share: ratio(pa.hours, a.wasted), WastedCost: pa.cost, Findings: pa.n})
		}
	}
	sort.SliceStable(r.ByPattern, func(i, j int) bool { return r.ByPattern[i].WastedGPUHours > r.ByPattern[j].WastedGPUHours })
	for _, j := range a.jobs {
		j.Link = cfg.link(cfg.Grafana.JobDashboard, p, "job", j.Job, "hostname", j.Hostname)
		r.TopJobs = append(r.TopJobs, *j)
	}
	sort.Slice(r.TopJobs, func(i, k int) bool {
		x, y := r.TopJobs[i], r.TopJobs[k]
		if x.WastedGPUHours != y.WastedGPUHours {
			return x.WastedGPUHours > y.WastedGPUHours
		}
		return x.Hostname+"|"+x.Job < y.Hostname+"|"+y.Job
	})
	r.TopJobs = top(r.TopJobs, cfg.Top)
	for _, u := range a.users {
		if u.WastedGPUHours <= 0 && u.AllocatedGPUHours <= 0 {
			continue
		}
		u.Link = cfg.link(cfg.Grafana.UserDashboard, p, "user", u.User)
		r.TopUsers = append(r.TopUsers, *u)
	}
	sort.Slice(r.TopUsers, func(i, k int) bool {
		x, y := r.TopUsers[i], r.TopUsers[k]
		if x.WastedGPUHours != y.WastedGPUHours {
			return x.WastedGPUHours > y.WastedGPUHours
		}
		return x.User < y.User
	})
	r.TopUsers = top(r.TopUsers, cfg.Top)
	sort.Slice(a.findings, func(i, k int) bool {
		if a.findings[i].w != a.findings[k].w {
			return a.findings[i].w > a.findings[k].w
		}
		return a.findings[i].f.Key() < a.findings[k].f.Key()
	})
	for _, it := range top(a.findings, cfg.Top) {
		f := it.f
		r.Advice = append(r.Advice, AdviceRow{Job: f.Job, User: f.User, Hostname: f.Hostname, Pattern: f.Pattern,
			WastedGPUHours: it.w, Advice: Advise(f), Link: cfg.link(cfg.Grafana.JobDashboard, p, "job", f.Job, "hostname", f.Hostname)})
	}
	r.Shared = a.topShared(cfg, p)
}

// sharedRow is an allocation's row in the shared GPUs' list, when it held
// shares of its GPUs rather than the whole of them.
func sharedRow(al *accounting.Allocation) (SharedRow, bool) {
	if !al.Shared() {
		return SharedRow{}, false
	}
	return SharedRow{Job: al.Job, User: al.User, Team: al.Team, Hostname: al.Hostname, Share: al.Share(),
		AllocatedGPUHours: al.Allocated, ActiveGPUHours: al.Used, WastedGPUHours: al.Wasted}, true
}

// topShared is the aggregate's holders of shared GPUs, most wasted first,
// at most cfg.Top of them, each linked to its job's dashboard.
func (a *agg) topShared(cfg *Config, p Period) []SharedRow {
	rows := append([]SharedRow(nil), a.shared...)
	sort.Slice(rows, func(i, k int) bool {
		x, y := rows[i], rows[k]
		if x.WastedGPUHours != y.WastedGPUHours {
			return x.WastedGPUHours > y.WastedGPUHours
		}
		return x.Hostname+"|"+x.Job < y.Hostname+"|"+y.Job
	})
	rows = top(rows, cfg.Top)
	for i := range rows {
		rows[i].Link = cfg.link(cfg.Grafana.JobDashboard, p, "job", rows[i].Job, "hostname", rows[i].Hostname)
	}
	return rows
}

func top[T any](s []T, n int) []T {
	if n > 0 && len(s) > n {
		return s[:n]
	}
	return s
}

func containsPattern(ps []schema.Pattern, p schema.Pattern) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

func teamOf(t string) string {
	if t == "" {
		return noTeam
	}
	return t
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// dayIndex finds the day that t falls in, or -1.
func dayIndex(days []Period, t time.Time) int {
	i := sort.Search(len(days), func(i int) bool { return days[i].End.After(t) })
	if i < len(days) && !t.Before(days[i].Start) {
		return i
	}
	return -1
}

// spreadOverDays splits w over the days in proportion to the finding's
// time in each.
func spreadOverDays(f *finding.Finding, w float64, days []Period) []float64 {
	out := make([]float64, len(days))
	if !f.End.After(f.Start) {
		if d := dayIndex(days, f.End); d >= 0 {
			out[d] = w
		}
		return out
	}
	var total time.Duration
	for i, d := range days {
		o := accounting.Overlap(f.Start, f.End, d.Start, d.End)
		out[i] = o.Seconds()
		total += o
	}
	for i := range out {
		out[i] = w * ratio(out[i], total.Seconds())
	}
	return out
}

// link builds a Grafana dashboard URL for the period with var-* values.
func (c *Config) link(dashboard string, p Period, kv ...string) string {
	if c.Grafana.URL == "" || dashboard == "" {
		return ""
	}
	v := url.Values{}
	v.Set("from", strconv.FormatInt(p.Start.UnixMilli(), 10))
	v.Set("to", strconv.FormatInt(p.End.UnixMilli(), 10))
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set("var-"+kv[i], kv[i+1])
	}
	return strings.TrimRight(c.Grafana.URL, "/") + "/" + strings.TrimLeft(dashboard, "/") + "?" + v.Encode()
}
