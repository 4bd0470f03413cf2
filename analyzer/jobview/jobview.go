// Package jobview is what one user sees about one job: who held which GPUs
// when, how much of each GPU the job used (utilization, SM activity,
// memory, power and energy), how busy its CPUs were, and what the
// analyzer's detectors found in it, with advice. Every figure is one PromQL
// aggregate over the job's own series in the window its samples span, read
// through the same query.Querier as the analyzer (Prometheus or the
// embedded store); the findings come from the analyzer's engine run over
// the job's devices only.
package jobview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/schema"
)

// ErrNoData: the query backend holds no series of the job in the lookback.
var ErrNoData = errors.New("no telemetry for this job")

const (
	defaultLookback = 30 * 24 * time.Hour
	defaultPoints   = 40
	// coarsePoints is how finely the lookback is searched for the job's
	// first and last buckets; the window is then found to the second in
	// those two buckets.
	coarsePoints = 720
	// mJPerKWh converts DCGM's energy counter (mJ) to kWh.
	mJPerKWh = 3.6e9
	parallel = 4
)

// Build reads the job view.
func Build(ctx context.Context, o Options, ref Ref) (*Report, error) {
	if o.Querier == nil {
		return nil, errors.New("job view: no querier")
	}
	if o.Config.Step == 0 {
		o.Config = config.Default()
	}
	if o.Lookback <= 0 {
		o.Lookback = defaultLookback
	}
	if o.Points <= 0 {
		o.Points = defaultPoints
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = o.Now.Truncate(time.Second)
	sel := ref.Selector()
	start, end, devs, err := locate(ctx, o, sel)
	if errors.Is(err, ErrNoData) && ref.Slurm == "" {
		// Not under the workload's own labels: perhaps under the names
		// honor_labels: false gives them.
		ex := ref
		ex.exported = true
		if s, e, d, xerr := locate(ctx, o, ex.Selector()); xerr == nil {
			ref, sel, start, end, devs, err = ex, ex.Selector(), s, e, d, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", ref, err)
	}
	r := &Report{Job: ref.String(), Start: start, End: end, Source: "query", Findings: []Finding{}}
	if ref.Slurm != "" {
		r.Scheduler = schema.SchedulerSlurm
	} else {
		r.Scheduler = schema.SchedulerKubernetes
		r.Team = ref.Namespace
	}
	w := end.Sub(start) + time.Millisecond
	r.Window = model.Duration(w).String()
	r.DurationHours = end.Sub(start).Hours()
	// The findings do not depend on the figures: they are read side by
	// side, and the figures must be in place before the sparklines.
	var fs []Finding
	var held holding
	done := make(chan error, 1)
	go func() {
		var err error
		fs, held, err = findings(ctx, o, ref, r.Start, r.End, devs)
		done <- err
	}()
	err = figures(ctx, o, ref, r, devs, w)
	if err == nil {
		r.Health, err = healthSignals(ctx, o, ref, r.End)
	}
	if err == nil {
		err = sparklines(ctx, o, sel, r)
	}
	if ferr := <-done; err == nil {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", ref, err)
	}
	for _, f := range fs {
		r.Findings = append(r.Findings, f)
		if r.User == "" {
			r.User, r.Team, r.Kind = f.User, f.Team, f.Kind
		}
	}
	r.finish(o)
	r.Totals.GPUHours *= held.fraction()
	r.Tenants = held.tenants
	return r, nil
}

// findings runs the analyzer's engine over the job's devices in its window
// and keeps the findings on the job, and what the accounting says it and
// the other holders of its GPUs held.
func findings(ctx context.Context, o Options, ref Ref, start, end time.Time, devs []device) ([]Finding, holding, error) {
	uuids := make([]string, 0, len(devs))
	for _, d := range devs {
		uuids = append(uuids, d.uuid)
	}
	sq, err := newScoped(o.Querier, uuids)
	if err != nil {
		return nil, holding{}, err
	}
	step := o.Config.Step.D()
	// Steps are (end-step, end]: the first one must hold the first sample,
	// and one more after the last sample lets the detectors see the end.
	from := start.Add(-time.Millisecond).Truncate(step)
	to := end.Add(-time.Millisecond).Truncate(step).Add(2 * step)
	// The step in progress is judged by no one yet (docs/accounting.md).
	if done := accounting.Complete(to, o.Now, step); done.After(from) {
		to = done
	}
	if n := int(to.Sub(from) / step); n > maxSteps {
		from = to.Add(-maxSteps * step)
	}
	e, err := engine.New(engine.Options{Querier: sq, Config: o.Config, ChunkSteps: maxSteps})
	if err != nil {
		return nil, holding{}, err
	}
	an, err := e.AnalyzeWindow(ctx, from, to)
	if err != nil {
		return nil, holding{}, err
	}
	held := holdingOf(an.Book, ref.String())
	var out []Finding
	for _, f := range an.Findings {
		if f.Job != ref.String() {
			continue
		}
		jf := Finding{Finding: f, Detail: f.Advice}
		jf.Advice = report.Advise(&f)
		out = append(out, jf)
	}
	return out, held, nil
}

// finish fills the totals, the state and the verdict on coverage.
func (r *Report) finish(o Options) {
	r.Coverage = 1
	var samples int
	for _, g := range r.GPUs {
		r.Coverage = math.Min(r.Coverage, g.Coverage)
		samples = max(samples, g.Samples)
		if g.EnergyKWh != nil {
			r.Totals.EnergyKWh += *g.EnergyKWh
		}
	}
	r.Totals.GPUHours = float64(len(r.GPUs)) * r.DurationHours
	for _, f := range r.Findings {
		r.Totals.WastedGPUHours += f.WastedGPUHours
		r.Totals.DegradedGPUHours += f.Evidence[schema.EvidenceDegraded]
		if f.Pattern == schema.GPUFault && f.Evidence["ended_by_fault"] > 0 {
			if r.Health == nil {
				r.Health = &Health{}
			}
			r.Health.EndedByFault = report.Advise(&f.Finding)
		}
	}
	switch {
	case samples < 3:
		r.NotEnoughData = fmt.Sprintf("only %d sample(s) per GPU: the job was too short to judge", samples)
	case r.Coverage < float64(o.Config.MinCoverage):
		r.NotEnoughData = fmt.Sprintf("samples cover only %.0f%% of the job's span (at least %.0f%% needed): the exporter or the scrapes had gaps",
			100*r.Coverage, 100*float64(o.Config.MinCoverage))
	}
	// A job whose newest sample is older than a few analysis steps ended
	// (or its exporter went away, which the scheduler's state settles).
	r.State = "running"
	if o.Now.Sub(r.End) > 2*o.Config.Step.D() {
		r.State = "ended"
	}
	if s := o.Scheduler; s != nil {
		if s.State != "" {
			r.State = strings.ToLower(s.State)
		}
		if s.User != "" {
			r.User = s.User
		}
		if s.Account != "" {
			r.Account = s.Account
		}
		if s.Name != "" {
			r.JobName = s.Name
		}
		if s.CPUs > 0 && r.CPU != nil {
			r.CPU.Allocated = s.CPUs
			eff := r.CPU.MeanCores / float64(s.CPUs)
			r.CPU.Efficiency = &eff
		}
	}
}
