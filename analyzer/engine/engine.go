// Package engine runs the analyzer: it reads step features through a
// query.Querier, advances the detectors' state, and yields findings and
// usage intervals. Analyze is the one-shot over a window (gpuwatch analyze);
// Cycle is the incremental step the daemon, the agent and the demo call,
// which reads only the steps since the previous cycle with a fixed number
// of queries and keeps the detectors' state in the store.
package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Options configure an Engine.
type Options struct {
	Querier query.Querier
	// Store keeps state between cycles; Cycle needs it, Analyze does not.
	Store  *store.Store
	Config config.Config
	Logger *slog.Logger
	// MaxCatchUp bounds the steps one cycle reads after a pause (default 12:
	// an hour at 5m steps); older missed steps are skipped, which the
	// detectors see as unknown, never as idle.
	MaxCatchUp int
	// WarmUp is the history the first cycle of a fresh store reads (default
	// 2h), so a restarted daemon with no state need not wait hours before
	// it can judge jobs that were already idle. Still one fetch.
	WarmUp time.Duration
	// ChunkSteps bounds the steps one fetch of Analyze reads, which bounds
	// its memory (default 288: a day at 5m steps).
	ChunkSteps int
	// Retain is how long an allocation's state is kept after its last step
	// (default 24h), so a job that comes back after a gap keeps its history.
	Retain time.Duration
	// Limits, when set, is asked once per fetch for the batch jobs' own
	// run-time limits (facts.SlurmSource: one squeue call), which overlong
	// then judges by instead of the configured maximum of the job's kind.
	Limits LimitSource
	// Owners, when set, is asked once per fetch for the Kubernetes pods'
	// owners (kube.Facts: one list per kind), whose kind (a Notebook's
	// server is interactive) outranks allocation_info and names; the
	// Slurm batch flag comes with Limits.
	Owners LimitSource
}

// LimitSource gives what a scheduler says of its jobs now; only the time
// limit is read here. facts.SlurmSource is one.
type LimitSource interface {
	Lookup(ctx context.Context, jobs []string) (map[string]*facts.Facts, error)
}

// Engine is the analyzer.
type Engine struct {
	o   Options
	det *detect.Detector
	// replay, when set, stands in for fetching in Analyze: it yields the
	// steps of [start, start+total steps) as fetched before. The detectors
	// are a pure function of the steps and the configuration, so a test
	// that analyzes one data set under many configurations fetches it once
	// (see stepCache in the tests); Coverage.Exporters is then empty.
	replay func(start time.Time, total int) (<-chan []features.Step, func() error)
}

// New validates the options.
func New(o Options) (*Engine, error) {
	if o.Querier == nil {
		return nil, errors.New("engine: no querier")
	}
	if o.Config.Step == 0 {
		o.Config = config.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxCatchUp <= 0 {
		o.MaxCatchUp = 12
	}
	if o.WarmUp <= 0 {
		o.WarmUp = 2 * time.Hour
	}
	if o.ChunkSteps <= 0 {
		o.ChunkSteps = 288
	}
	if o.Retain <= 0 {
		o.Retain = 24 * time.Hour
	}
	return &Engine{o: o, det: detect.New(o.Config)}, nil
}

// UseLimits sets Options.Limits on a built engine (the daemon's wiring
// knows the scheduler only after the engine is made); call it before the
// first cycle.
func (e *Engine) UseLimits(l LimitSource) { e.o.Limits = l }

// UseOwners sets Options.Owners on a built engine.
func (e *Engine) UseOwners(o LimitSource) { e.o.Owners = o }

// Step returns the analysis step.
func (e *Engine) Step() time.Duration { return e.o.Config.Step.D() }

// Analyze reads [from, to) step by step and returns every finding made
// over it, merged per allocation and pattern, sorted by GPU-hours wasted.
// It touches no store.
func (e *Engine) Analyze(ctx context.Context, from, to time.Time) ([]finding.Finding, error) {
	a, err := e.AnalyzeWindow(ctx, from, to)
	return a.Findings, err
}

// Analysis is a one-shot analysis: the findings, what the data covered,
// and the window's GPU-hours as the accounting package defines them.
type Analysis struct {
	Findings []finding.Finding `json:"findings"`
	Coverage Coverage          `json:"coverage"`
	Book     *accounting.Book  `json:"-"`
}

// AnalyzeWindow is Analyze with the coverage of the data it read. The
// window is put on the step grid first (accounting.OnGrid: the steps that
// start in [from, to)), the grid the daemon's cycles judge, so that the
// same data gives the same findings and GPU-hours here as in the daemon,
// the reports and the job view, whatever the window's alignment; Coverage
// says which steps that was. The caller keeps to at or before the end of
// the last complete step (accounting.Complete).
func (e *Engine) AnalyzeWindow(ctx context.Context, from, to time.Time) (Analysis, error) {
	step := e.Step()
	start, end := accounting.OnGrid(from, to, step)
	n := int(end.Sub(start) / step)
	if n < 1 {
		return Analysis{}, fmt.Errorf("analyze %s to %s: window shorter than one step (%s): no analysis step starts in it", from.Format(time.RFC3339), to.Format(time.RFC3339), step)
	}
	return e.analyzeGrid(ctx, start, n)
}

// analyzeGrid analyzes the n steps from the grid point from.
func (e *Engine) analyzeGrid(ctx context.Context, from time.Time, n int) (Analysis, error) {
	step := e.Step()
	cov := newCoverageCounter(e.o.Config)
	end := from.Add(time.Duration(n) * step)
	ledger := accounting.NewLedger(from, end)
	st := detect.NewState()
	// Findings count only the window's steps: the lead's judge (a GPU idle
	// since before --from is idle since then) but add no hours.
	st.Window = from
	// The window is judged as a daemon started at its first step would
	// judge it: after the daemon's warm-up (WarmUp back from its first
	// cycle, one step in), so an allocation that began just before the
	// window has a known start in both. Those lead steps feed the detectors
	// only: coverage and accounting are the window's steps', and a finding
	// made in them counts only by its part in the window.
	lead := max(0, int((e.o.WarmUp-step)/step))
	first := from.Add(-time.Duration(lead) * step)
	// Orphans are tracked per process, not per allocation: keep the newest
	// finding of each key, which spans its whole episode.
	orphans := map[string]finding.Finding{}
	// What one chunk learns (exporters' pods, each device's cadence) the
	// next starts from, as a daemon's next cycle does.
	mem := features.NewMemory()
	chunks, fetched := e.fetchChunks(ctx, first, lead+n, mem)
	for steps := range chunks {
		e.timeLimits(ctx, st, steps)
		for _, s := range steps {
			if !s.Start.Before(from) {
				cov.add(s)
			}
			res := e.det.Step(st, s)
			for i := range res.Usage {
				ledger.AddUsage(&res.Usage[i])
			}
			for _, f := range res.Open {
				if f.Pattern == schema.OrphanProcess {
					orphans[f.Key()] = f
				}
			}
		}
	}
	if err := fetched(); err != nil {
		return Analysis{}, fmt.Errorf("analyze: %w", err)
	}
	extra := make([]finding.Finding, 0, len(orphans))
	for _, f := range orphans {
		extra = append(extra, f)
	}
	all := st.Findings(extra)
	fs := all[:0]
	for i := range all {
		if all[i].End.Before(from) {
			continue // over before the window, seen in the lead only
		}
		fs = append(fs, all[i])
		ledger.AddFinding(&fs[len(fs)-1])
	}
	c := cov.result(from, end, len(fs))
	c.Exporters = mem.Exporters.List()
	c.IdleFloors = st.Floors.Floors(e.o.Config.Idle)
	c.Shares = e.hamiShares(ctx, end, end.Sub(from))
	return Analysis{Findings: fs, Coverage: c, Book: ledger.Close()}, nil
}

// hamiShares reads the HAMi shares of the window (one query). A failed
// read costs the shares only, never the findings: the data a HAMi fleet
// adds is advice on quotas, not a judgement.
func (e *Engine) hamiShares(ctx context.Context, end time.Time, window time.Duration) []features.ShareWaste {
	if e.replay != nil {
		return nil // replayed steps, no store to ask
	}
	ws, err := features.ReadHAMi(ctx, e.o.Querier, end, window)
	if err != nil {
		e.o.Logger.Warn("HAMi shares not read; findings unaffected", "err", err)
		return nil
	}
	return ws
}

// fetchChunks reads total steps from start, ChunkSteps at a time, one
// chunk ahead of the caller: the queries of the next chunk run while the
// detectors judge this one, which on a week's analysis keeps a second core
// busy. Each chunk starts from what the one before taught mem, as a
// daemon's next cycle does. The caller ranges over the chunks to the end,
// then calls wait for the first error; after an error the channel closes
// early.
func (e *Engine) fetchChunks(ctx context.Context, start time.Time, total int, mem *features.Memory) (<-chan []features.Step, func() error) {
	if e.replay != nil {
		return e.replay(start, total)
	}
	step := e.Step()
	out := make(chan []features.Step, 1)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(out)
		for done := 0; done < total; {
			k := min(e.o.ChunkSteps, total-done)
			steps, err := features.FetchWith(gctx, e.o.Querier, start.Add(time.Duration(done+k)*step), k, step, mem)
			if err != nil {
				return err
			}
			select {
			case out <- steps:
			case <-gctx.Done():
				return gctx.Err()
			}
			done += k
		}
		return nil
	})
	return out, g.Wait
}

// CycleResult is what one cycle did.
type CycleResult struct {
	// From and To bound the steps read; zero when the cycle had nothing new.
	From, To time.Time
	Steps    int
	// Queries issued (features.Queries per fetch, whatever the fleet).
	Queries int
	// Allocations tracked after the cycle.
	Allocations int
	// Unknown lists allocations (host|job) whose data was missing in the
	// last step: no finding was made on them.
	Unknown []string
	// Findings open at the end of the cycle, plus one-off findings made in
	// it; they are also saved to the store.
	Findings []finding.Finding
	// Withdrawn holds the keys of verdicts the cycle withdrew (see
	// detect.Result); the store forgot them.
	Withdrawn []string
	// Usage intervals written; Intervals holds them.
	Usage     int
	Intervals []store.Usage
	// Coverage of the steps read.
	Coverage Coverage
}

// Cycle reads the steps completed since the previous cycle (at most
// MaxCatchUp; the first cycle reads WarmUp), advances the state kept in the
// store, records usage and findings, and returns the findings.
func (e *Engine) Cycle(ctx context.Context, now time.Time) (CycleResult, error) {
	var res CycleResult
	if e.o.Store == nil {
		return res, errors.New("cycle: no store")
	}
	step := e.Step()
	end := now.Truncate(step)
	st, cursor, err := e.load(ctx)
	if err != nil {
		return res, fmt.Errorf("cycle: %w", err)
	}
	n := e.stepsToRead(cursor, end)
	if n < 1 {
		res.Allocations = len(st.Allocs)
		return res, nil
	}
	steps, err := features.FetchWith(ctx, e.o.Querier, end, n, step, st.Memory)
	res.Queries = features.Queries
	if err != nil {
		return res, fmt.Errorf("cycle: %w", err)
	}
	res.From, res.To, res.Steps = end.Add(-time.Duration(n)*step), end, n
	e.timeLimits(ctx, st, steps)
	usage, withdrawn := e.detectSteps(st, steps, &res)
	st.Prune(end.Add(-e.o.Retain))
	st.Memory.Prune(end.Add(-e.o.Retain))
	for _, a := range st.Allocs {
		// Closed episodes were returned and saved by the cycle that closed
		// them; the daemon's state need not grow with history.
		a.Closed = nil
	}
	if err := e.record(ctx, st, end, usage, withdrawn, &res); err != nil {
		return res, fmt.Errorf("cycle: %w", err)
	}
	res.Allocations = len(st.Allocs)
	return res, nil
}

// stepsToRead is how many steps ending at end the cycle reads: WarmUp's
// worth on the first cycle, else those since the cursor, at most
// MaxCatchUp (an analyzer that fell behind skips, and says so).
func (e *Engine) stepsToRead(cursor, end time.Time) int {
	step := e.Step()
	n := max(1, int(e.o.WarmUp/step))
	if !cursor.IsZero() {
		n = int(end.Sub(cursor) / step)
	}
	if n < 1 {
		return n
	}
	if !cursor.IsZero() && n > e.o.MaxCatchUp {
		e.o.Logger.Warn("analyzer fell behind; skipping steps", "missed_steps", n-e.o.MaxCatchUp, "since", cursor)
		n = e.o.MaxCatchUp
	}
	return n
}

// detectSteps runs detection over steps in order, setting res's findings,
// unknown allocations and coverage, and returns the usage intervals and
// the withdrawn findings (key to since) to record.
func (e *Engine) detectSteps(st *detect.State, steps []features.Step, res *CycleResult) ([]store.Usage, map[string]time.Time) {
	var usage []store.Usage
	var oneOffs, open []finding.Finding
	withdrawn := map[string]time.Time{}
	cov := newCoverageCounter(e.o.Config)
	for i, s := range steps {
		cov.add(s)
		r := e.det.Step(st, s)
		usage = append(usage, r.Usage...)
		for _, w := range r.Withdrawn {
			withdrawn[w.Key] = w.Since
		}
		// A job ended of a GPU fault: its finding's last form, which no
		// later step returns open.
		oneOffs = append(oneOffs, r.Ended...)
		if i == len(steps)-1 {
			open = r.Open
			res.Unknown = r.Unknown
			continue
		}
		for _, f := range r.Open {
			if f.Pattern == schema.StartupOverhead {
				oneOffs = append(oneOffs, f)
			}
		}
	}
	res.Findings = append(oneOffs, open...)
	detect.Sort(res.Findings)
	res.Coverage = cov.result(res.From, res.To, len(res.Findings))
	res.Coverage.Exporters = st.Memory.Exporters.List()
	return usage, withdrawn
}

// record stores the cycle's usage, withdrawals and findings, then the state
// with its cursor at end, in that order, stopping at the first error.
func (e *Engine) record(ctx context.Context, st *detect.State, end time.Time, usage []store.Usage, withdrawn map[string]time.Time, res *CycleResult) error {
	if err := e.o.Store.AddUsage(ctx, usage); err != nil {
		return err
	}
	res.Usage, res.Intervals = len(usage), usage
	if err := e.o.Store.WithdrawFindings(ctx, withdrawn); err != nil {
		return err
	}
	for k := range withdrawn {
		res.Withdrawn = append(res.Withdrawn, k)
	}
	sort.Strings(res.Withdrawn)
	if err := e.o.Store.SaveFindings(ctx, end, res.Findings); err != nil {
		return err
	}
	return e.save(ctx, st, end)
}

// timeLimits asks the scheduler for the time limits of the batch jobs in
// steps. A failed lookup leaves each allocation with the limit it was last
// told, or, never told, with the configured maximum.
func (e *Engine) timeLimits(ctx context.Context, st *detect.State, steps []features.Step) {
	st.TimeLimits, st.OwnerKinds = nil, nil
	e.podOwners(ctx, st, steps)
	if e.o.Limits == nil {
		return
	}
	seen := map[string]bool{}
	var jobs []string
	for _, s := range steps {
		for _, g := range s.GPUs {
			if g.HPCJob != "" && !seen[g.HPCJob] {
				seen[g.HPCJob] = true
				jobs = append(jobs, g.HPCJob)
			}
		}
	}
	if len(jobs) == 0 {
		return
	}
	fs, err := e.o.Limits.Lookup(ctx, jobs)
	if err != nil {
		e.o.Logger.Warn("scheduler time limits unknown this cycle; overlong keeps the last known or the configured maximum", "err", err)
		return
	}
	st.TimeLimits = make(map[string]time.Duration, len(fs))
	for job, f := range fs {
		if f != nil && f.TimeLimit > 0 {
			st.TimeLimits[job] = f.TimeLimit
		}
	}
	ownerKinds(st, fs)
}

// podOwners asks the Kubernetes owners of the pods in steps for their kinds.
func (e *Engine) podOwners(ctx context.Context, st *detect.State, steps []features.Step) {
	if e.o.Owners == nil {
		return
	}
	seen := map[string]bool{}
	var pods []string
	for _, s := range steps {
		for _, g := range s.GPUs {
			if id := g.NS + "/" + g.Pod; g.HPCJob == "" && g.Pod != "" && g.NS != "" && !seen[id] {
				seen[id] = true
				pods = append(pods, id)
			}
		}
	}
	if len(pods) == 0 {
		return
	}
	fs, err := e.o.Owners.Lookup(ctx, pods)
	if err != nil {
		e.o.Logger.Warn("pod owners unknown this cycle; kinds stay as last decided, else from names", "err", err)
		return
	}
	ownerKinds(st, fs)
}

// ownerKinds keeps the kinds the owners decided (KindSource set), by job,
// and the kinds an owner could not say (kind missing: JupyterHub
// unreachable), as an empty Kind with its source, so that no name decides
// them.
func ownerKinds(st *detect.State, fs map[string]*facts.Facts) {
	for job, f := range fs {
		if f == nil || f.KindSource == "" {
			continue
		}
		if _, _, missing := f.Value(schema.AttrKind); f.Alloc.Kind == "" && missing == "" {
			continue
		}
		if st.OwnerKinds == nil {
			st.OwnerKinds = map[string]detect.OwnerKind{}
		}
		st.OwnerKinds[job] = detect.OwnerKind{Kind: f.Alloc.Kind, Source: f.KindSource}
	}
}

type meta struct {
	Cursor  time.Time                      `json:"cursor"`
	Origin  time.Time                      `json:"origin"`
	Orphans map[string]*detect.OrphanState `json:"orphans"`
	// Floors is each GPU model's learnt idle floor. It replaced "power",
	// per-GPU baselines learnt only from steps already judged idle: a
	// state that still has them loads without them (the key is no field
	// any more), and the floors are learnt afresh.
	Floors detect.FloorBook `json:"idle_floors,omitempty"`
	// Memory is what the fetches learnt: exporters' pods, device cadences.
	Memory *features.Memory `json:"memory,omitempty"`
}

func (e *Engine) load(ctx context.Context) (*detect.State, time.Time, error) {
	db := e.o.Store.DB()
	st := detect.NewState()
	var raw string
	err := db.QueryRowContext(ctx, `SELECT v FROM analyzer_meta WHERE k = 'state'`).Scan(&raw)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, time.Time{}, nil
	case err != nil:
		return nil, time.Time{}, fmt.Errorf("load analyzer state: %w", err)
	}
	var m meta
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode analyzer state: %w", err)
	}
	st.Origin = m.Origin
	if m.Orphans != nil {
		st.Orphans = m.Orphans
	}
	if m.Floors != nil {
		st.Floors = m.Floors
	}
	if m.Memory != nil {
		st.Memory = m.Memory
	}
	rows, err := db.QueryContext(ctx, `SELECT akey, body FROM analyzer_allocations`)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("load allocations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, body string
		if err := rows.Scan(&k, &body); err != nil {
			return nil, time.Time{}, fmt.Errorf("load allocations: %w", err)
		}
		a := &detect.Alloc{}
		if err := json.Unmarshal([]byte(body), a); err != nil {
			return nil, time.Time{}, fmt.Errorf("decode allocation %s: %w", k, err)
		}
		st.Allocs[k] = a
	}
	return st, m.Cursor, rows.Err()
}

func (e *Engine) save(ctx context.Context, st *detect.State, cursor time.Time) error {
	tx, err := e.o.Store.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save analyzer state: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	// The whole live state is rewritten: pruned allocations disappear.
	if _, err := tx.ExecContext(ctx, `DELETE FROM analyzer_allocations`); err != nil {
		return fmt.Errorf("save analyzer state: %w", err)
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO analyzer_allocations VALUES (?,?,?)`)
	if err != nil {
		return fmt.Errorf("save analyzer state: %w", err)
	}
	defer ins.Close()
	for k, a := range st.Allocs {
		body, err := json.Marshal(a)
		if err != nil {
			return fmt.Errorf("encode allocation %s: %w", k, err)
		}
		if _, err := ins.ExecContext(ctx, k, a.LastStep.UnixMilli(), string(body)); err != nil {
			return fmt.Errorf("save allocation %s: %w", k, err)
		}
	}
	m, err := json.Marshal(meta{Cursor: cursor, Origin: st.Origin, Orphans: st.Orphans, Floors: st.Floors, Memory: st.Memory})
	if err != nil {
		return fmt.Errorf("encode analyzer state: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO analyzer_meta VALUES ('state', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, string(m)); err != nil {
		return fmt.Errorf("save analyzer state: %w", err)
	}
	return tx.Commit()
}
