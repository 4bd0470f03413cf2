package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// Source yields each cycle's findings (the analyzer engine, or a replay).
type Source interface {
	Findings(ctx context.Context, now time.Time) ([]finding.Finding, error)
}

// SourceFunc adapts a function to Source.
type SourceFunc func(ctx context.Context, now time.Time) ([]finding.Finding, error)

// Findings implements Source.
func (f SourceFunc) Findings(ctx context.Context, now time.Time) ([]finding.Finding, error) {
	return f(ctx, now)
}

// Job is an extra cron job (the weekly report, for example). It runs at
// each time Spec names and once when the daemon starts.
type Job struct {
	Name string
	// Spec is a 5-field cron spec; CRON_TZ=Zone/Name prefixes are honoured.
	Spec string
	Run  func(ctx context.Context, now time.Time) error
}

// Daemon runs detection and escalation cycles and the extra jobs on cron
// schedules. A run that would overlap the previous run of the same job is
// skipped.
type Daemon struct {
	Source    Source
	Escalator *Escalator
	// Spec schedules the cycles (e.g. "@every 1m", "*/5 * * * *").
	Spec     string
	Jobs     []Job
	Logger   *slog.Logger
	Now      func() time.Time
	Location *time.Location
}

func (d *Daemon) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Daemon) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}

// RunOnce runs one cycle. A failing source means unknown data: the cycle
// stops before any step.
func (d *Daemon) RunOnce(ctx context.Context) (CycleResult, error) {
	now := d.now()
	m := d.Escalator.Metrics
	res, err := d.cycle(ctx, now)
	if m != nil {
		if err != nil {
			m.Cycles.WithLabelValues("error").Inc()
		} else {
			m.Cycles.WithLabelValues("ok").Inc()
			m.LastEscalated.Set(float64(now.UnixNano()) / 1e9)
		}
	}
	return res, err
}

func (d *Daemon) cycle(ctx context.Context, now time.Time) (CycleResult, error) {
	// Interrupted steps are settled before the source is even asked.
	if !d.Escalator.reconciled {
		if err := d.Escalator.Reconcile(ctx, now); err != nil {
			return CycleResult{}, fmt.Errorf("reconcile: %w", err)
		}
	}
	fs, err := d.Source.Findings(ctx, now)
	if err != nil {
		return CycleResult{}, fmt.Errorf("findings: %w", err)
	}
	if m := d.Escalator.Metrics; m != nil {
		m.ObserveFindings(now, fs)
	}
	return d.Escalator.Cycle(ctx, now, fs)
}

// Run schedules cycles and jobs until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	loc := d.Location
	if loc == nil {
		loc = time.Local
	}
	cl := cronLogger{d.logger()}
	c := cron.New(cron.WithLocation(loc), cron.WithLogger(cl), cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	if _, err := c.AddFunc(d.Spec, func() {
		res, err := d.RunOnce(ctx)
		if err != nil {
			d.logger().Error("escalation cycle failed", "err", err)
			return
		}
		d.logger().Info("escalation cycle", "findings", res.Findings, "unknown", res.Unknown, "exempt", res.Exempt,
			"steps", res.Steps, "rate_limited", res.RateLimited)
	}); err != nil {
		return fmt.Errorf("cycle schedule %q: %w", d.Spec, err)
	}
	for _, j := range d.Jobs {
		if _, err := c.AddFunc(j.Spec, func() {
			if err := j.Run(ctx, d.now()); err != nil {
				d.logger().Error("job failed", "job", j.Name, "err", err)
			}
		}); err != nil {
			return fmt.Errorf("job %s schedule %q: %w", j.Name, j.Spec, err)
		}
	}
	c.Start()
	// Each job also runs once at start-up, so that a slot missed while the
	// daemon was down is caught up (jobs decide themselves whether a slot is
	// due; the report jobs keep an outbox).
	for _, j := range d.Jobs {
		if err := j.Run(ctx, d.now()); err != nil {
			d.logger().Error("job failed", "job", j.Name, "err", err)
		}
	}
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}

// ValidateSpec reports whether spec is a schedule Run accepts.
func ValidateSpec(spec string) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return fmt.Errorf("schedule %q: %w", spec, err)
	}
	return nil
}

type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append(kv, "err", err)...)
}
