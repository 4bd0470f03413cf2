package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/internal/cronspec"
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
	// Drainer, when set, takes nodes out of service after each escalation
	// (the policy's out_of_service), under the same leadership.
	Drainer *Drainer
	// Spec schedules the cycles (e.g. "@every 1m", "*/5 * * * *").
	Spec     string
	Jobs     []Job
	Logger   *slog.Logger
	Now      func() time.Time
	Location *time.Location
	// Leader, when set, lets this analyzer act only while it leads; Run
	// renews the claim every RenewEvery (default a minute). Its fence
	// guards every act of the escalator and the drainer and every write of
	// their audit logs (bind).
	Leader     leader.Leadership
	RenewEvery time.Duration

	health health
	bound  sync.Once
}

// health remembers the outcome of the last cycle for /healthz.
type health struct {
	mu      sync.Mutex
	lastOK  time.Time
	lastErr error
	errAt   time.Time
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

// Fence implements leader.Fencer: the fence of Leader, or, without one,
// the always-valid fence of a sole analyzer.
func (d *Daemon) Fence() leader.Fence {
	if d.Leader == nil {
		return leader.SoleFence()
	}
	return d.Leader.Fence()
}

// Guard is the check each act of this daemon's parts makes right before it
// runs, on the daemon's clock; the report jobs take it too.
func (d *Daemon) Guard() *leader.Guard {
	return &leader.Guard{Fencer: d, Now: d.now}
}

// bind puts the escalator and the drainer under the daemon's leadership:
// their acts check its fence right before they run, and their audit logs
// write only under its lease generation.
func (d *Daemon) bind() {
	d.bound.Do(func() {
		if d.Leader == nil {
			return
		}
		g := d.Guard()
		d.Escalator.Guard = g
		d.Escalator.Log.FenceWith(d)
		if d.Drainer != nil {
			d.Drainer.Guard = g
			d.Drainer.Log.FenceWith(d)
		}
	})
}

// RunOnce runs one cycle. A failing source means unknown data: the cycle
// stops before any step. A cycle that loses leadership midway (its renew
// deadline passed, or the store refused its lease generation) stops before
// its next act and reports Standby.
func (d *Daemon) RunOnce(ctx context.Context) (CycleResult, error) {
	d.bind()
	now := d.now()
	m := d.Escalator.Metrics
	res, err := d.cycle(ctx, now)
	if leader.Fenced(err) {
		d.logger().Warn("leadership lost during the cycle: stopped before acting", "err", err)
		res, err = CycleResult{Standby: true}, nil
	}
	d.health.mu.Lock()
	if err != nil {
		d.health.lastErr, d.health.errAt = err, now
	} else {
		d.health.lastOK, d.health.lastErr = now, nil
	}
	d.health.mu.Unlock()
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

// leads claims leadership.
func (d *Daemon) leads(ctx context.Context, now time.Time) (bool, error) {
	if d.Leader == nil {
		return true, nil
	}
	ok, err := d.Leader.Lead(ctx, now)
	if err != nil {
		return false, fmt.Errorf("leadership: %w", err)
	}
	return ok, nil
}

func (d *Daemon) cycle(ctx context.Context, now time.Time) (CycleResult, error) {
	if ok, err := d.leads(ctx, now); err != nil || !ok {
		return CycleResult{Standby: !ok && err == nil}, err
	}
	// Interrupted steps are settled before the source is even asked, on
	// every cycle: those of an older leader, and this one's own whose
	// outcome failed to be written.
	if err := d.Escalator.Reconcile(ctx, now); err != nil {
		return CycleResult{}, fmt.Errorf("reconcile: %w", err)
	}
	var res CycleResult
	fs, err := d.Source.Findings(ctx, now)
	switch {
	case errors.Is(err, ErrNoNewStep):
		// Nothing new to judge: the open episodes and the published
		// findings stay as the last step left them.
		res.Waiting = true
		err = nil
	case err != nil:
		return CycleResult{}, fmt.Errorf("findings: %w", err)
	default:
		if m := d.Escalator.Metrics; m != nil {
			m.ObserveFindings(now, fs)
		}
		res, err = d.Escalator.Cycle(ctx, now, fs)
	}
	if err != nil || d.Drainer == nil {
		return res, err
	}
	if _, err := d.Drainer.Cycle(ctx, now); err != nil {
		return res, fmt.Errorf("out of service: %w", err)
	}
	return res, nil
}

// Run schedules cycles and jobs until ctx ends.
func (d *Daemon) Run(ctx context.Context) error {
	d.bind()
	loc := d.Location
	if loc == nil {
		loc = time.Local
	}
	cl := cronLogger{d.logger()}
	c := cron.New(cron.WithLocation(loc), cron.WithLogger(cl), cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	cycle := func() {
		res, err := d.RunOnce(ctx)
		if err != nil {
			d.logger().Error("escalation cycle failed", "err", err)
			return
		}
		if res.Waiting {
			d.logger().Debug("escalation cycle: no new analysis step yet")
			return
		}
		d.logger().Info("escalation cycle", "findings", res.Findings, "unknown", res.Unknown, "exempt", res.Exempt,
			"steps", res.Steps, "rate_limited", res.RateLimited)
	}
	// One cycle at start, so that findings, coverage and health are there
	// from the first scrape, not after the first scheduled slot.
	cycle()
	if _, err := c.AddFunc(d.Spec, cycle); err != nil {
		return fmt.Errorf("cycle schedule %q: %w", d.Spec, err)
	}
	for _, j := range d.Jobs {
		if _, err := c.AddFunc(j.Spec, func() { d.runJob(ctx, j) }); err != nil {
			return fmt.Errorf("job %s schedule %q: %w", j.Name, j.Spec, err)
		}
	}
	if d.Leader != nil {
		every := d.RenewEvery
		if every <= 0 {
			every = time.Minute
		}
		go d.renew(ctx, every)
	}
	c.Start()
	// Each job also runs once at start-up, so that a slot missed while the
	// daemon was down is caught up (jobs decide themselves whether a slot is
	// due; the report jobs keep an outbox).
	for _, j := range d.Jobs {
		d.runJob(ctx, j)
	}
	<-ctx.Done()
	<-c.Stop().Done()
	return nil
}

// runJob runs an extra job on the leader only: a standby sends no report.
func (d *Daemon) runJob(ctx context.Context, j Job) {
	now := d.now()
	if d.Leader != nil {
		if ok, err := d.Leader.Lead(ctx, now); err != nil || !ok {
			if err != nil {
				d.logger().Error("job skipped", "job", j.Name, "err", err)
			}
			return
		}
	}
	if err := j.Run(ctx, now); err != nil {
		d.logger().Error("job failed", "job", j.Name, "err", err)
	}
}

// renew keeps the leader's claim fresh between cycles.
func (d *Daemon) renew(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := d.Leader.Lead(ctx, d.now()); err != nil {
				d.logger().Warn("renewing leadership failed", "err", err)
			}
		}
	}
}

// Health says whether the daemon is doing its work: healthy until a cycle
// fails, and again once one succeeds. The reason names the last good cycle
// and the last error, so a probe's log says what went wrong (Prometheus
// down, store unwritable) rather than only that something did.
func (d *Daemon) Health() (ok bool, reason string) {
	d.health.mu.Lock()
	defer d.health.mu.Unlock()
	last := "no cycle yet"
	if !d.health.lastOK.IsZero() {
		last = "last good cycle " + d.health.lastOK.UTC().Format(time.RFC3339)
	}
	if d.health.lastErr != nil {
		return false, fmt.Sprintf("last cycle failed at %s: %v (%s)", d.health.errAt.UTC().Format(time.RFC3339), d.health.lastErr, last)
	}
	return true, "ok, " + last
}

// HealthHandler serves Health: 200 or 503 with the reason.
func (d *Daemon) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, reason := d.Health()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = fmt.Fprintln(w, reason)
	})
}

// ValidateSpec reports whether spec is a schedule Run accepts.
func ValidateSpec(spec string) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return fmt.Errorf("schedule %q: %w", spec, err)
	}
	if err := cronspec.CheckEvery(spec); err != nil {
		return fmt.Errorf("schedule %q: %w", spec, err)
	}
	return nil
}

type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append(kv, "err", err)...)
}
