package web

import (
	"context"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// StoreFindings reads the current findings from the analyzer's store: for
// each allocation and pattern, the newest finding recorded by a cycle within
// Window of now. A finding that no cycle repeated within the window has
// ended (the job stopped or recovered) and leaves the page.
type StoreFindings struct {
	Store  *store.Store
	Window time.Duration
	Now    func() time.Time
}

// CurrentFindings implements FindingsSource.
func (s StoreFindings) CurrentFindings(ctx context.Context) ([]finding.Finding, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	w := s.Window
	if w <= 0 {
		w = time.Hour
	}
	t := now()
	// The upper bound is exclusive; a cycle stamped "now" must count.
	return s.Store.FindingsBetween(ctx, t.Add(-w), t.Add(time.Millisecond))
}

// AuditLog reads the page's audit entries from the audit package's log.
type AuditLog struct{ Log *audit.Log }

// RecentAudit implements AuditSource.
func (a AuditLog) RecentAudit(ctx context.Context, limit int) ([]AuditEntry, error) {
	evs, err := a.Log.Events(ctx, audit.Filter{Limit: limit})
	if err != nil {
		return nil, err
	}
	out := make([]AuditEntry, 0, len(evs))
	for i := len(evs) - 1; i >= 0; i-- { // Events is oldest first
		e := evs[i]
		out = append(out, AuditEntry{Time: e.At, Step: e.Step, Actuator: e.Actuator, State: string(e.State),
			DryRun: e.DryRun, Hostname: e.Hostname, Job: e.Job, User: e.User, Team: e.Team, Pattern: e.Pattern, Detail: e.Detail})
	}
	return out, nil
}

// BuiltReports gives the latest weekly reports (the last complete week in
// the reports' time zone, the one the Monday e-mail covers) of the teams in
// the report configuration and of the fleet, built from the store's
// intervals with the report package, charts embedded as data: URIs.
type BuiltReports struct {
	Builder  *report.Builder
	Renderer *report.Renderer
	Now      func() time.Time
}

func (b BuiltReports) period() report.Period {
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	loc := b.Builder.Config.Location()
	return report.WeekOf(report.WeekOf(now(), loc).Start.Add(-time.Hour), loc)
}

// LatestReports implements ReportSource.
func (b BuiltReports) LatestReports(ctx context.Context) ([]ReportSummary, error) {
	p := b.period()
	teams, fleet, err := b.Builder.BuildAll(ctx, p, b.Builder.Config.TeamNames(), true)
	if err != nil {
		return nil, err
	}
	var out []ReportSummary
	if fleet != nil {
		out = append(out, summarize(fleet, p))
	}
	for _, r := range teams {
		if r != nil {
			out = append(out, summarize(r, p))
		}
	}
	return out, nil
}

// FleetAccounting implements AccountingSource: the fleet report's totals.
func (b BuiltReports) FleetAccounting(ctx context.Context) (ReportSummary, error) {
	p := b.period()
	r, err := b.Builder.Build(ctx, p, "")
	if err != nil {
		return ReportSummary{}, err
	}
	return summarize(r, p), nil
}

func summarize(r *report.Report, p report.Period) ReportSummary {
	s := ReportSummary{Team: r.Team, Period: p.Label, GeneratedAt: r.GeneratedAt,
		AllocatedGPUHours: r.Totals.AllocatedGPUHours, ActiveGPUHours: r.Totals.ActiveGPUHours, WastedGPUHours: r.Totals.WastedGPUHours,
		OverLimitGPUHours: r.Totals.OverLimitGPUHours, DegradedGPUHours: r.Totals.DegradedGPUHours, OrphanGPUHours: r.Totals.OrphanGPUHours}
	top := 0.0
	for _, row := range r.ByPattern {
		if row.WastedGPUHours > top {
			top, s.TopPattern = row.WastedGPUHours, row.Pattern
		}
	}
	return s
}

// ReportHTML implements ReportSource.
func (b BuiltReports) ReportHTML(ctx context.Context, team string) ([]byte, error) {
	if team != "" {
		if _, ok := b.Builder.Config.Teams[team]; !ok {
			return nil, ErrNoReport
		}
	}
	r, err := b.Builder.Build(ctx, b.period(), team)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, ErrNoReport
	}
	out, err := b.Renderer.Render(r, report.ImagesDataURI)
	if err != nil {
		return nil, err
	}
	return []byte(out.HTML), nil
}
