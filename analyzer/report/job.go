package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// Job is a scheduled task in the analyzer daemon's shape: the daemon runs
// Run at each time Spec names. Report jobs tick every few minutes; Run
// itself decides from the configured schedule whether a report is due,
// so a slot missed while the daemon was down is sent at the first tick
// after it comes back, and failed deliveries are retried at later ticks.
type Job struct {
	Name string
	Spec string
	Run  func(ctx context.Context, now time.Time) error
}

// Deps are what the report jobs need.
type Deps struct {
	Store  *store.Store
	Config *Config
	Sender mail.Sender
	// Planner adds the capacity plan of each report's period (optional).
	Planner Planner
	Logger  *slog.Logger
	// Guard checks leadership right before each send (nil: a sole
	// analyzer): a leader paused past its lease sends nothing.
	Guard *leader.Guard
}

// TickSpec is how often report jobs wake up to check for due reports and
// retry deliveries. Schedules on a multiple of five minutes are on time.
const TickSpec = "*/5 * * * *"

// catch-up windows: a slot further back than this is not sent late.
const (
	weeklyCatchUp = 8 * 24 * time.Hour
	dailyCatchUp  = 2 * 24 * time.Hour
)

// WeeklyJob sends each configured team its report for the last full ISO
// week, and the fleet report to the administrators, at Config.Schedule.
func WeeklyJob(ctx context.Context, d Deps) (Job, error) {
	r, err := newRunner(ctx, d, d.Config.Schedule, weeklyCatchUp)
	if err != nil {
		return Job{}, err
	}
	return Job{Name: "report-weekly", Spec: WithTimeZone(TickSpec, d.Config.TimeZone), Run: r.weekly}, nil
}

// DailyDigestJob sends the administrators the fleet report of the previous
// day at Config.DigestSchedule; ok is false when no digest is configured.
func DailyDigestJob(ctx context.Context, d Deps) (job Job, ok bool, err error) {
	if d.Config.DigestSchedule == "" || len(d.Config.Admins) == 0 {
		return Job{}, false, nil
	}
	r, err := newRunner(ctx, d, d.Config.DigestSchedule, dailyCatchUp)
	if err != nil {
		return Job{}, false, err
	}
	return Job{Name: "report-daily-digest", Spec: WithTimeZone(TickSpec, d.Config.TimeZone), Run: r.daily}, true, nil
}

type runner struct {
	d        Deps
	spec     string
	sched    cron.Schedule
	lookback time.Duration
	outbox   *Outbox
	builder  *Builder
	render   *Renderer
	mu       sync.Mutex // one run at a time, whatever the daemon does
}

func newRunner(ctx context.Context, d Deps, spec string, lookback time.Duration) (*runner, error) {
	if d.Store == nil || d.Config == nil || d.Sender == nil {
		return nil, errors.New("report job: store, config and sender are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	spec = WithTimeZone(spec, d.Config.TimeZone)
	sched, err := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor).Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("report schedule %q: %w", spec, err)
	}
	ob, err := OpenOutbox(ctx, d.Store)
	if err != nil {
		return nil, err
	}
	ob.Guard = d.Guard
	rd, err := NewRenderer()
	if err != nil {
		return nil, err
	}
	b := NewBuilder(d.Store, d.Config)
	b.Planner = d.Planner
	return &runner{d: d, spec: spec, sched: sched, lookback: lookback, outbox: ob, render: rd,
		builder: b}, nil
}

// WithTimeZone prefixes a cron spec with CRON_TZ unless it names a zone.
func WithTimeZone(spec, tz string) string {
	if tz == "" || strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ=") {
		return spec
	}
	return "CRON_TZ=" + tz + " " + spec
}

// LastSlot is the latest scheduled time at or before now, within lookback.
func LastSlot(s cron.Schedule, now time.Time, lookback time.Duration) (time.Time, bool) {
	var last time.Time
	for t := s.Next(now.Add(-lookback)); !t.IsZero() && !t.After(now); t = s.Next(t) {
		last = t
	}
	return last, !last.IsZero()
}

func (r *runner) weekly(ctx context.Context, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if slot, ok := LastSlot(r.sched, now, r.lookback); ok {
		p := WeekOf(slot, r.d.Config.Location()).Prev()
		errs = append(errs, r.enqueue(ctx, now, p, KindTeamWeekly, KindFleetWeekly, r.d.Config.TeamNames()))
	}
	errs = append(errs, r.flush(ctx, now, KindTeamWeekly, KindFleetWeekly))
	return errors.Join(errs...)
}

func (r *runner) daily(ctx context.Context, now time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	if slot, ok := LastSlot(r.sched, now, r.lookback); ok {
		p := DayOf(slot, r.d.Config.Location()).Prev()
		errs = append(errs, r.enqueue(ctx, now, p, "", KindFleetDaily, nil))
	}
	errs = append(errs, r.flush(ctx, now, KindFleetDaily))
	return errors.Join(errs...)
}

// enqueue builds and stores the reports of p that were never enqueued.
func (r *runner) enqueue(ctx context.Context, now time.Time, p Period, teamKind, fleetKind string, teams []string) error {
	cfg := r.d.Config
	todo, admin, err := r.pending(ctx, p, teamKind, fleetKind, teams)
	if err != nil {
		return err
	}
	if len(todo) == 0 && !admin {
		return nil
	}
	r.builder.Now = func() time.Time { return now }
	reports, fleet, err := r.builder.BuildAll(ctx, p, todo, admin)
	if err != nil {
		return fmt.Errorf("build reports %s: %w", p.Label, err)
	}
	var items []mailing
	for _, t := range todo {
		items = append(items, mailing{teamKind, t, cfg.Teams[t].Recipients, reports[t]})
	}
	if admin {
		items = append(items, mailing{fleetKind, "", cfg.Admins, fleet})
	}
	items, errs := r.skipEmpty(ctx, now, p, items)
	rendered, rerrs := r.renderAll(items)
	for i, it := range items {
		if rerrs[i] != nil {
			errs = append(errs, rerrs[i])
			continue
		}
		added, err := r.outbox.Enqueue(ctx, Entry{Kind: it.kind, Team: it.team, Period: p.Label, Created: now,
			Subject: rendered[i].Subject, Message: rendered[i].Message(it.to)})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if added {
			r.d.Logger.Info("report queued", "kind", it.kind, "team", it.team, "period", p.Label, "recipients", len(it.to))
		}
	}
	return errors.Join(errs...)
}

// mailing is one report of a period and whom it goes to.
type mailing struct {
	kind, team string
	to         []string
	rep        *Report
}

// pending returns the teams whose report of p was never enqueued, and
// whether the fleet report was not (only asked when there are admins).
func (r *runner) pending(ctx context.Context, p Period, teamKind, fleetKind string, teams []string) (todo []string, admin bool, err error) {
	for _, t := range teams {
		has, err := r.outbox.Has(ctx, teamKind, t, p.Label)
		if err != nil {
			return nil, false, err
		}
		if !has {
			todo = append(todo, t)
		}
	}
	if len(r.d.Config.Admins) > 0 {
		has, err := r.outbox.Has(ctx, fleetKind, "", p.Label)
		if err != nil {
			return nil, false, err
		}
		admin = !has
	}
	return todo, admin, nil
}

// skipEmpty drops the reports with nothing to tell, recording each as done
// so that later ticks do not rebuild it.
func (r *runner) skipEmpty(ctx context.Context, now time.Time, p Period, items []mailing) ([]mailing, []error) {
	var errs []error
	kept := items[:0]
	for _, it := range items {
		if it.rep.Totals.AllocatedGPUHours > 0 || it.rep.Totals.WastedGPUHours > 0 {
			kept = append(kept, it)
			continue
		}
		if err := r.outbox.Skip(ctx, it.kind, it.team, p.Label, now, "no GPU use"); err != nil {
			errs = append(errs, err)
		}
		r.d.Logger.Info("no GPU use, no report", "kind", it.kind, "team", it.team, "period", p.Label)
	}
	return kept, errs
}

// renderAll renders every report, each with its own error. Charts are the
// costly part: draw them on every core.
func (r *runner) renderAll(items []mailing) ([]*Rendered, []error) {
	rendered := make([]*Rendered, len(items))
	rerrs := make([]error, len(items))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range items {
		g.Go(func() error {
			rendered[i], rerrs[i] = r.render.Render(items[i].rep, ImagesCID)
			return nil // each report keeps its own error
		})
	}
	_ = g.Wait()
	return rendered, rerrs
}

func (r *runner) flush(ctx context.Context, now time.Time, kinds ...string) error {
	sent, err := r.outbox.Flush(ctx, r.d.Sender, now, kinds...)
	if sent > 0 {
		r.d.Logger.Info("reports sent", "count", sent)
	}
	if err != nil {
		r.d.Logger.Error("reports not delivered; kept in the outbox for the next run", "err", err)
	}
	return err
}
