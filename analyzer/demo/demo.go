// Package demo is `gpuwatch demo`: the whole product on a simulated
// cluster in one command. It fast-forwards a scenario of the simulator
// through the embedded telemetry store on a fake clock, runs the analyzer's
// cycles and the policy's escalation in dry-run as the analyzer daemon
// would, writes the reports, dashboards, findings and audit log into an
// output folder, prints a summary, and can then serve the exporter's
// /metrics and the analyzer's web page.
package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/schema"
)

// DefaultPolicy is the built-in demo policy: every pattern escalates, in
// dry-run.
//
//go:embed policy.yaml
var DefaultPolicy []byte

// Options of a demo run. Zero values take the defaults noted.
type Options struct {
	// Scenario to simulate (default sim.DefaultScenario()).
	Scenario *sim.Scenario
	Seed     int64
	// Length of the simulated span (default 168h) and sample step (30s).
	Length, Step time.Duration
	// Origin is where the simulated span starts. Zero: the scenario's own
	// origin, else Monday 00:00 UTC of the week before Now's, so that a
	// simulated week is the last complete ISO week, the one a weekly report
	// covers, and the simulator runs on into the present when served live.
	Origin time.Time
	// Out is the output folder (required).
	Out string
	// Policy to escalate under (default DefaultPolicy). It is always run
	// in dry-run, whatever it says.
	Policy *policy.Policy
	// Config holds the analyzer's thresholds (default SiteConfig()).
	Config config.Config
	// CycleEvery is how often the analyzer cycle runs, a multiple of the
	// analyzer's step (default: every step, as the daemon does).
	CycleEvery time.Duration
	// Now is the wall clock (default time.Now).
	Now func() time.Time
	// Progress receives the progress bar; Terminal redraws it in place,
	// otherwise a few lines are written. Nil: no progress.
	Progress io.Writer
	Terminal bool
	Logger   *slog.Logger
}

// Result is what a run produced.
type Result struct {
	Scenario    string
	Origin, End time.Time
	Step        time.Duration
	Nodes, GPUs int
	Collections int
	Cycles      int
	Findings    []finding.Finding
	Audit       []audit.Event
	// Notifications counts notify and warn steps the demo recorded.
	Notifications int
	// Fleet is the fleet report of the simulated span: the figures the
	// summary prints.
	Fleet   *report.Report
	Teams   []string
	Files   []string
	Elapsed time.Duration
	// Plan is the capacity plan of the simulated span; nil, with PlanErr
	// saying why, when the span is shorter than the plan's minimum history.
	Plan    *plan.Plan
	PlanErr error
}

// Demo holds a run's state: the state store stays open after Simulate so
// that the web page can serve it.
type Demo struct {
	o      Options
	sc     *sim.Scenario
	st     *store.Store
	log    *audit.Log
	rec    *recorder
	result *Result
	// seen is what the analyzer's cycles saw, for the web page.
	seen *engine.Metrics
}

// MaxLength bounds the simulated span: eight weeks simulate in minutes,
// a century would run for hours.
const MaxLength = 8 * 7 * 24 * time.Hour

// New validates the options and prepares the output folder: the files a
// previous demo left there are removed (only those: tsdb/, gpuwatch.db,
// reports/, dashboards/, findings.json, audit.json), so that the store's
// analyzer state starts fresh.
func New(o Options) (*Demo, error) {
	if o.Out == "" {
		return nil, &clikit.UsageError{Err: errors.New("no output folder")}
	}
	if o.Scenario == nil {
		o.Scenario = sim.DefaultScenario()
	}
	if o.Length == 0 {
		o.Length = 168 * time.Hour
	}
	if o.Step == 0 {
		o.Step = 30 * time.Second
	}
	if o.Config.Step == 0 {
		o.Config = SiteConfig()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	an := o.Config.Step.D()
	if o.CycleEvery == 0 {
		o.CycleEvery = an
	}
	switch {
	case o.Step < time.Second:
		return nil, usage("--step %s is shorter than a second", o.Step)
	case o.Step > an/2:
		// The analyzer needs several samples per step to tell a known
		// step from missing data.
		return nil, usage("--step %s must be at most half the analyzer step %s", o.Step, an)
	case o.Length < an:
		return nil, usage("--length %s is shorter than the analyzer step %s", o.Length, an)
	case o.CycleEvery < an || o.CycleEvery%an != 0:
		return nil, usage("--cycle-interval %s must be a multiple of the analyzer step %s", o.CycleEvery, an)
	}
	if o.Policy == nil {
		p, err := policy.Parse(DefaultPolicy)
		if err != nil {
			return nil, fmt.Errorf("built-in policy: %w", err)
		}
		o.Policy = p
	}
	forceDryRun(o.Policy)
	if o.Origin.IsZero() {
		o.Origin = o.Scenario.Origin
	}
	if o.Origin.IsZero() {
		o.Origin = lastWeek(o.Now())
	}
	if err := os.MkdirAll(o.Out, 0o750); err != nil {
		return nil, fmt.Errorf("output folder: %w", err)
	}
	for _, name := range []string{"tsdb", "gpuwatch.db", "gpuwatch.db-wal", "gpuwatch.db-shm", "reports", "dashboards", "findings.json", "audit.json"} {
		if err := os.RemoveAll(filepath.Join(o.Out, name)); err != nil {
			return nil, fmt.Errorf("clear previous output: %w", err)
		}
	}
	return &Demo{o: o, sc: o.Scenario, rec: &recorder{}, seen: engine.NewMetrics()}, nil
}

// usage is a bad option: exit code 2.
func usage(format string, a ...any) error { return &clikit.UsageError{Err: fmt.Errorf(format, a...)} }

// lastWeek is Monday 00:00 UTC of the week before now's week.
func lastWeek(now time.Time) time.Time {
	now = now.UTC()
	back := (int(now.Weekday()) + 6) % 7
	return time.Date(now.Year(), now.Month(), now.Day()-back-7, 0, 0, 0, 0, time.UTC)
}

// forceDryRun makes every tier and rule inherit the global dry-run: the
// demo's cluster is simulated, and a policy written for a real one must not
// look as if it acted.
func forceDryRun(p *policy.Policy) {
	p.DryRun = true
	for i := range p.Tiers {
		p.Tiers[i].DryRun = nil
		for j := range p.Tiers[i].Rules {
			p.Tiers[i].Rules[j].DryRun = nil
		}
	}
}

// Simulate fast-forwards the scenario, runs the analyzer and the
// escalation, and writes the outputs.
func (d *Demo) Simulate(ctx context.Context) (*Result, error) {
	o := d.o
	began := time.Now()
	db, err := embedded.Open(filepath.Join(o.Out, "tsdb"), embedded.Options{Logger: atLeast(o.Logger, slog.LevelError), Retention: o.Length + 15*24*time.Hour})
	if err != nil {
		return nil, fmt.Errorf("telemetry store: %w", err)
	}
	defer db.Close()
	if d.st, err = store.Open(filepath.Join(o.Out, "gpuwatch.db")); err != nil {
		return nil, fmt.Errorf("state store: %w", err)
	}
	if d.log, err = audit.Open(ctx, d.st); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	eng, err := engine.New(engine.Options{Querier: db, Store: d.st, Config: o.Config, Logger: atLeast(o.Logger, slog.LevelWarn)})
	if err != nil {
		return nil, fmt.Errorf("analyzer: %w", err)
	}
	var now time.Time
	dmn := &daemon.Daemon{
		Source: daemon.EngineSource{Engine: eng, Metrics: d.seen},
		Escalator: &daemon.Escalator{Policy: o.Policy, Log: d.log, Actuators: d.rec.actuators(), Logger: atLeast(o.Logger, slog.LevelWarn),
			// The scenario owns the simulated jobs: it answers for their scheduler.
			Facts: &facts.Resolver{Sources: simload.FactSources(d.sc, o.Origin)}},
		Logger: atLeast(o.Logger, slog.LevelWarn),
		Now:    func() time.Time { return now },
	}
	res := &Result{Scenario: d.sc.Name, Origin: o.Origin, End: o.Origin.Add(o.Length), Step: o.Step, Nodes: len(d.sc.Nodes)}
	for _, n := range d.sc.Nodes {
		res.GPUs += n.GPUs
	}
	bar := newProgress(o.Progress, o.Terminal, int(o.Length/o.Step)+1)
	app := db.Appender()
	next := o.Origin.Add(o.CycleEvery)
	sink := func(t time.Time, fams []*dto.MetricFamily) error {
		if err := app.AppendFamilies(ctx, t, fams); err != nil {
			return fmt.Errorf("append at %s: %w", t.Format(time.RFC3339), err)
		}
		res.Collections++
		// A cycle at t reads the steps that ended by t; their samples are in.
		for !t.Before(next) {
			now = next
			if _, err := dmn.RunOnce(ctx); err != nil {
				return fmt.Errorf("analyzer cycle at %s: %w", now.Format(time.RFC3339), err)
			}
			res.Cycles++
			next = next.Add(o.CycleEvery)
		}
		bar.set(res.Collections, t.Sub(o.Origin))
		return nil
	}
	// The simulated span is (Origin, Origin+Length]: a sample at Origin
	// itself would fall in the analysis step that ends there, which belongs
	// to the week before, and leak usage into it.
	if _, err := simload.Replay(ctx, d.sc, simload.Options{Seed: o.Seed, Origin: o.Origin, From: o.Step, To: o.Length, Resolution: o.Step}, sink); err != nil {
		bar.done()
		return nil, fmt.Errorf("simulation: %w", err)
	}
	bar.done()
	res.Plan, res.PlanErr = plan.Build(ctx, db, res.Origin, res.End, plan.Options{Books: accounting.Books{Records: d.st, Step: o.Config.Step.D()}})
	// A short span has no plan, and every output says why; any other
	// failure ends the demo.
	if short := (*plan.ShortHistoryError)(nil); res.PlanErr != nil && !errors.As(res.PlanErr, &short) {
		return nil, fmt.Errorf("capacity plan: %w", res.PlanErr)
	}
	d.result = res // the reports read the plan through it
	if err := d.writeOutputs(ctx, res); err != nil {
		return nil, err
	}
	res.Notifications = d.rec.count()
	res.Elapsed = time.Since(began)
	d.result = res
	return res, nil
}

// Close releases the state store.
func (d *Demo) Close() error {
	if d.st == nil {
		return nil
	}
	return d.st.Close()
}

// SiteConfig is the demo site's analyzer configuration: the defaults, plus
// the run-time limits its operators set per kind (its training
// partition's 48 hours for batch jobs, a day for sessions), since gpuwatch
// builds in none and the simulated site has no scheduler to report one.
func SiteConfig() config.Config {
	c := config.Default()
	c.Patterns.Overlong.MaxRuntime[schema.KindBatch] = config.Duration(48 * time.Hour)
	c.Patterns.Overlong.MaxRuntime[schema.KindInteractive] = config.Duration(24 * time.Hour)
	return c
}
