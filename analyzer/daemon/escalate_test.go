package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/escalation"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fakeActuator records calls and models a scheduler: a reclaimed job stops.
type fakeActuator struct {
	name    string
	mu      sync.Mutex
	calls   []string
	stopped map[string]bool
	fail    error
}

func (f *fakeActuator) Name() string { return f.name }

func (f *fakeActuator) Act(_ context.Context, req *action.Request) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, req.Step+" "+req.Finding.Job)
	if f.fail != nil {
		return "", f.fail
	}
	if req.Step == action.StepReclaim {
		if f.stopped[req.Finding.Job] {
			return "", action.ErrGone
		}
		f.stopped[req.Finding.Job] = true
	}
	return "ok", nil
}

func (f *fakeActuator) Reconcile(_ context.Context, req *action.Request) (action.Outcome, string, error) {
	if req.Step != action.StepReclaim {
		return action.Unknowable, "signal", nil
	}
	if f.stopped[req.Finding.Job] {
		return action.Applied, "gone", nil
	}
	return action.NotApplied, "running", nil
}

func (f *fakeActuator) count(prefix string) int {
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

const testPolicy = `
dry_run: false
min_warning: 20m
rate_limits: {reclaims_per_cycle: 2, reclaims_per_hour: 3}
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: prod
    match: {partitions: [prod]}
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 30m}]
  - name: dev
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s, channels: [webhook]}
          - {action: warn, after: 10m, channels: [webhook]}
          - {action: checkpoint, after: 20m, signal: USR1}
          - {action: reclaim, after: 40m}
exemptions:
  - {user: alice}
`

type rig struct {
	esc    *Escalator
	log    *audit.Log
	slurm  *fakeActuator
	hook   *fakeActuator
	reg    *prometheus.Registry
	start  time.Time
	policy *policy.Policy
	st     *store.Store
}

func newRig(t testing.TB, doc string, st *store.Store) *rig {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st, err = store.Open(":memory:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{log: lg, policy: p, reg: prometheus.NewRegistry(), st: st,
		slurm: &fakeActuator{name: "slurm", stopped: map[string]bool{}},
		hook:  &fakeActuator{name: "webhook", stopped: map[string]bool{}},
		start: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
	r.esc = &Escalator{Policy: p, Log: lg, Metrics: NewMetrics(r.reg), Facts: &ownerFacts{},
		Actuators: map[string]action.Actuator{"slurm": r.slurm, "webhook": r.hook}}
	return r
}

// ownerFacts stands in for Slurm in the escalation tests: each job's
// partition as idle() registered it, the finding's user and team; down
// makes every fact missing, as a failing squeue does.
type ownerFacts struct {
	down bool
	gone bool // the scheduler answers but no longer knows the job
	// elsewhere: the job under the id runs on another node (another
	// cluster's job, or one after a controller rebuild).
	elsewhere bool
	calls     int
}

// partitions is each job's partition as idle() registered it, shared by
// the tests that run in parallel: a job id keeps one partition across them
// (a test that needs another partition uses a job id of its own).
var partitions = struct {
	sync.Mutex
	of map[string]string
}{of: map[string]string{}}

func setPartition(job, partition string) {
	partitions.Lock()
	defer partitions.Unlock()
	partitions.of[job] = partition
}

func partitionOf(job string) string {
	partitions.Lock()
	defer partitions.Unlock()
	return partitions.of[job]
}

func (o *ownerFacts) Resolve(_ context.Context, fs []finding.Finding) []*facts.Facts {
	o.calls++
	out := make([]*facts.Facts, len(fs))
	for i, f := range fs {
		fa := &facts.Facts{Scheduler: schema.SchedulerSlurm}
		switch {
		case o.down:
			fa.MarkMissing("squeue --json: exit status 1")
		case o.gone:
			fa.Gone = true
			fa.MarkMissing("slurm does not know job " + f.Job + " (gone)")
		default:
			for a, v := range map[schema.Attr]string{schema.AttrPartition: partitionOf(f.Job), schema.AttrUser: f.User, schema.AttrTeam: f.Team,
				schema.AttrQoS: "normal", schema.AttrAccount: "a", schema.AttrJobName: "j", schema.AttrKind: "batch"} {
				fa.Set(a, v)
			}
			// Slurm says the job runs on the finding's host and began
			// with its evidence: the target is proven.
			fa.Identity = facts.Identity{Nodes: []string{f.Hostname}, Since: f.Start}
			if o.elsewhere {
				fa.Identity.Nodes = []string{"n-other"}
			}
		}
		out[i] = fa
	}
	return out
}

func idle(job, user, partition string, at time.Time) finding.Finding {
	setPartition(job, partition)
	return finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Job: job, User: user, Team: "t",
		Hostname: "n1", Scheduler: "slurm", Start: at.Add(-time.Hour), End: at, WastedGPUHours: 2}
}

// cycle runs one cycle at minute m with the given jobs idle (fresh evidence).
func (r *rig) cycle(t *testing.T, m int, jobs ...finding.Finding) CycleResult {
	t.Helper()
	now := r.start.Add(time.Duration(m) * time.Minute)
	var fs []finding.Finding
	for _, f := range jobs {
		f.End = now
		fs = append(fs, f)
	}
	res, err := r.esc.Cycle(context.Background(), now, fs)
	if err != nil {
		t.Fatalf("cycle at +%dm: %v", m, err)
	}
	return res
}

func TestEscalationLadder(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	j := idle("101", "bob", "dev", r.start)
	want := []struct {
		minute      int
		hook, slurm []string
	}{
		{0, []string{"notify 101"}, nil},
		{5, []string{"notify 101"}, nil},
		{10, []string{"notify 101", "warn 101"}, nil},
		{20, []string{"notify 101", "warn 101"}, nil},                        // checkpoint due, but warned only 10m ago
		{30, []string{"notify 101", "warn 101"}, []string{"checkpoint 101"}}, // min_warning (20m) has passed
		{40, []string{"notify 101", "warn 101"}, []string{"checkpoint 101"}}, // reclaim keeps its 20m after the checkpoint
		{50, []string{"notify 101", "warn 101"}, []string{"checkpoint 101", "reclaim 101"}},
		{51, []string{"notify 101", "warn 101"}, []string{"checkpoint 101", "reclaim 101"}}, // never twice
		{90, []string{"notify 101", "warn 101"}, []string{"checkpoint 101", "reclaim 101"}},
	}
	for _, w := range want {
		r.cycle(t, w.minute, j)
		if fmt.Sprint(r.hook.calls) != fmt.Sprint(w.hook) || fmt.Sprint(r.slurm.calls) != fmt.Sprint(w.slurm) {
			t.Fatalf("+%dm: webhook %v slurm %v; want %v %v", w.minute, r.hook.calls, r.slurm.calls, w.hook, w.slurm)
		}
	}
	evs, err := r.log.Events(context.Background(), audit.Filter{Job: "101"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		got = append(got, e.Step+":"+string(e.State))
	}
	wantLog := "notify:intended notify:done warn:intended warn:done checkpoint:intended checkpoint:done reclaim:intended reclaim:done"
	if strings.Join(got, " ") != wantLog {
		t.Errorf("audit = %v\nwant %s", got, wantLog)
	}
	if v := testutil.ToFloat64(r.esc.Metrics.Actions.WithLabelValues("n1", "reclaim", "done")); v != 1 {
		t.Errorf("reclaim done counter = %v", v)
	}
}

func TestNeverActs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		mutate func(f *finding.Finding)
		policy string
		skip   string // expected audit note step, if any
	}{
		{"exempt user", func(f *finding.Finding) { f.User = "alice" }, testPolicy, "exempt"},
		{"scheduler down", func(f *finding.Finding) { f.User = "down" }, testPolicy, escalation.NoteFacts},
		{"stale evidence", func(f *finding.Finding) { f.End = f.End.Add(-time.Hour) }, testPolicy, ""},
		{"unknown evidence", func(f *finding.Finding) { f.Evidence = map[string]float64{"unknown": 1} }, testPolicy, ""},
		{"no job", func(f *finding.Finding) { f.Job = "" }, testPolicy, ""},
		{"tier without reclaim", func(f *finding.Finding) { f.Job = "7-prod"; setPartition(f.Job, "prod") }, testPolicy, "reclaim"},
		{"dry run", nil, strings.Replace(testPolicy, "dry_run: false", "dry_run: true", 1), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, tc.policy, nil)
			r.esc.Facts.(*ownerFacts).down = tc.name == "scheduler down"
			for m := 0; m <= 120; m += 10 {
				now := r.start.Add(time.Duration(m) * time.Minute)
				f := idle("7", "bob", "dev", now)
				if tc.mutate != nil {
					tc.mutate(&f)
				}
				if _, err := r.esc.Cycle(context.Background(), now, []finding.Finding{f}); err != nil {
					t.Fatal(err)
				}
			}
			if r.slurm.count("reclaim") != 0 || r.slurm.count("checkpoint") != 0 {
				t.Fatalf("acted: %v", r.slurm.calls)
			}
			evs, _ := r.log.Events(context.Background(), audit.Filter{})
			if tc.skip != "" {
				found := false
				for _, e := range evs {
					found = found || (e.Step == tc.skip && e.State == audit.Skipped)
				}
				if !found {
					t.Errorf("audit has no skipped %s note: %+v", tc.skip, evs)
				}
			}
			if tc.name == "dry run" {
				var dry []string
				for _, e := range evs {
					if e.State == audit.DryRun {
						dry = append(dry, e.Step+": "+e.Detail)
					}
				}
				if len(dry) != 2 || !strings.Contains(dry[1], "would cancel") {
					t.Errorf("dry-run audit = %v, want checkpoint and reclaim that would have happened", dry)
				}
			}
		})
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	var jobs []finding.Finding
	for i := 0; i < 5; i++ {
		jobs = append(jobs, idle(fmt.Sprint(200+i), "bob", "dev", r.start))
	}
	for _, m := range []int{0, 10, 30, 50} {
		r.cycle(t, m, jobs...)
	}
	if n := r.slurm.count("reclaim"); n != 2 {
		t.Fatalf("first reclaim cycle cancelled %d jobs, want 2 (per cycle)", n)
	}
	res := r.cycle(t, 51, jobs...)
	if n := r.slurm.count("reclaim"); n != 3 || res.RateLimited != 2 {
		t.Fatalf("after second cycle %d reclaims (rate limited %d), want 3 (per hour) and 2 deferred", n, res.RateLimited)
	}
	r.cycle(t, 60, jobs...)
	if n := r.slurm.count("reclaim"); n != 3 {
		t.Fatalf("hourly limit broken: %d reclaims", n)
	}
	r.cycle(t, 111, jobs...) // an hour after the first reclaims
	if n := r.slurm.count("reclaim"); n != 5 {
		t.Fatalf("after the hour: %d reclaims, want 5", n)
	}
}

// A crash between intent and outcome: the restarted escalator reconciles
// with the target before anything else and never cancels twice.
func TestCrashBetweenIntentAndResult(t *testing.T) {
	t.Parallel()
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("cancel applied=%v", applied), func(t *testing.T) {
			t.Parallel()
			st, err := store.Open(t.TempDir() + "/state.db")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r := newRig(t, testPolicy, st)
			j := idle("300", "bob", "dev", r.start)
			for _, m := range []int{0, 10, 30} {
				r.cycle(t, m, j)
			}
			// Simulate the crash: write the reclaim intent as the escalator
			// does, (maybe) cancel, and never write the outcome.
			ep := r.start
			key := audit.Key(j.Key(), ep, "reclaim")
			j.End = r.start.Add(40 * time.Minute)
			payload := fmt.Sprintf(`{"step":"reclaim","finding":{"job":"300","hostname":"n1","pattern":"cpu_only","end":%q}}`, j.End.Format(time.RFC3339))
			if _, ok, err := r.log.Intend(context.Background(), audit.Record{Key: key, FindingKey: j.Key(), Episode: ep, Step: "reclaim",
				Actuator: "slurm", Hostname: "n1", Job: "300", Payload: payload}, j.End); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if applied {
				r.slurm.stopped["300"] = true
			}
			// Restart: a new escalator over the same store and scheduler.
			r2 := newRig(t, testPolicy, st)
			r2.slurm = r.slurm
			r2.esc.Actuators["slurm"] = r.slurm
			if _, err := r2.esc.Cycle(context.Background(), r.start.Add(41*time.Minute), []finding.Finding{j}); err != nil {
				t.Fatal(err)
			}
			r2.cycle(t, 50, j)
			wantCalls := 1 // the cancel after reconciling "not applied"
			if applied {
				wantCalls = 0
			}
			if n := r.slurm.count("reclaim"); n != wantCalls {
				t.Fatalf("scancel calls after restart = %d, want %d", n, wantCalls)
			}
			rec, _, _ := r2.log.Get(context.Background(), key)
			if rec.State != audit.Done {
				t.Fatalf("record = %+v, want done", rec)
			}
			pending, _ := r2.log.Pending(context.Background())
			if len(pending) != 0 {
				t.Fatalf("pending after reconcile: %+v", pending)
			}
		})
	}
}

// A failed step is retried after the policy's backoff, doubling per
// attempt, not every cycle; the audit counts the attempts.
func TestFailedStepRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	r.hook.fail = fmt.Errorf("connection refused")
	j := idle("400", "bob", "dev", r.start)
	for _, m := range []int{0, 1, 4, 5, 6, 14} { // fails at 0 and 5; 5m, then 10m of backoff
		r.cycle(t, m, j)
	}
	if n := r.hook.count("notify"); n != 2 {
		t.Fatalf("notify calls by +14m = %d, want 2 (at 0 and +5m)", n)
	}
	r.hook.fail = nil
	r.cycle(t, 15, j)
	r.cycle(t, 16, j)
	if n := r.hook.count("notify"); n != 3 {
		t.Fatalf("notify calls = %d, want 2 failures then 1 success", n)
	}
	rec, _, _ := r.log.Get(context.Background(), audit.Key(j.Key(), r.start, "notify"))
	if rec.State != audit.Done || rec.Attempts != 3 {
		t.Fatalf("record = %+v", rec)
	}
}

// A step that keeps failing is given up after max_attempts: the audit says
// so once, and nothing after it runs in the episode.
func TestFailingStepGivenUp(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(testPolicy, "rate_limits:", "retry: {initial_backoff: 1m, max_backoff: 2m, max_attempts: 3}\nrate_limits:", 1)
	r := newRig(t, doc, nil)
	r.hook.fail = fmt.Errorf("connection refused")
	j := idle("401", "bob", "dev", r.start)
	for m := 0; m <= 60; m++ {
		r.cycle(t, m, j)
	}
	if n := r.hook.count("notify"); n != 3 {
		t.Fatalf("notify calls = %d, want 3 attempts (0, +1m, +3m)", n)
	}
	if n := len(r.slurm.calls) + r.hook.count("warn"); n != 0 {
		t.Fatalf("%d later steps ran after a given-up step", n)
	}
	rec, ok, _ := r.log.Get(context.Background(), audit.Key(j.Key(), r.start, "gave_up"))
	if !ok || rec.State != audit.Skipped || !strings.Contains(rec.Detail, "gave up notify after 3 failed attempts") {
		t.Fatalf("give-up record = %+v (found %v)", rec, ok)
	}
}

func TestSourceErrorMeansNoAction(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	d := &Daemon{Escalator: r.esc, Now: func() time.Time { return r.start },
		Source: SourceFunc(func(context.Context, time.Time) ([]finding.Finding, error) {
			return nil, fmt.Errorf("prometheus unreachable")
		})}
	if _, err := d.RunOnce(context.Background()); err == nil {
		t.Fatal("want error")
	}
	if len(r.hook.calls)+len(r.slurm.calls) != 0 {
		t.Fatal("acted on unknown data")
	}
	if v := testutil.ToFloat64(r.esc.Metrics.Cycles.WithLabelValues("error")); v != 1 {
		t.Errorf("error cycles = %v", v)
	}
}

// Cycles that would overlap are skipped; extra jobs run at start and on
// their schedule.
func TestDaemonSkipsOverlappingCycles(t *testing.T) {
	r := newRig(t, testPolicy, nil)
	var mu sync.Mutex
	running, maxRunning, cycles, jobRuns := 0, 0, 0, 0
	src := SourceFunc(func(ctx context.Context, now time.Time) ([]finding.Finding, error) {
		mu.Lock()
		running++
		cycles++
		if running > maxRunning {
			maxRunning = running
		}
		mu.Unlock()
		time.Sleep(2500 * time.Millisecond) // longer than the 1s schedule
		mu.Lock()
		running--
		mu.Unlock()
		return nil, nil
	})
	d := &Daemon{Source: src, Escalator: r.esc, Spec: "@every 1s", Jobs: []Job{{Name: "report", Spec: "@every 1h",
		Run: func(context.Context, time.Time) error { mu.Lock(); jobRuns++; mu.Unlock(); return nil }}}}
	ctx, cancel := context.WithTimeout(context.Background(), 4500*time.Millisecond)
	defer cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if maxRunning != 1 || cycles < 1 || cycles > 2 {
		t.Fatalf("cycles %d, at most %d at once; want 1-2 cycles never overlapping", cycles, maxRunning)
	}
	if jobRuns != 1 {
		t.Fatalf("extra job ran %d times, want once at start", jobRuns)
	}
	if err := ValidateSpec("61 * * * *"); err == nil {
		t.Fatal("bad spec accepted")
	}
}

// A job on two hosts has two findings; it is signalled and cancelled once.
func TestMultiHostJobActedOnOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	a := idle("500", "bob", "dev", r.start)
	b := a
	b.Hostname = "n2"
	for _, m := range []int{0, 10, 30, 40, 50} {
		r.cycle(t, m, a, b)
	}
	if c, k := r.slurm.count("checkpoint"), r.slurm.count("reclaim"); c != 1 || k != 1 {
		t.Fatalf("checkpoints %d, reclaims %d; want one each: %v", c, k, r.slurm.calls)
	}
	if n := r.hook.count("warn"); n != 2 {
		t.Errorf("warnings %d, want one per host finding", n)
	}
}

// Leaving dry-run mid-episode: the owner gets a real warning and the full
// minimum warning time before anything is done.
func TestLeavingDryRunWarnsForReal(t *testing.T) {
	t.Parallel()
	st, err := store.Open(t.TempDir() + "/s.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dry := newRig(t, strings.Replace(testPolicy, "dry_run: false", "dry_run: true", 1), st)
	j := idle("600", "bob", "dev", dry.start)
	for _, m := range []int{0, 10, 30, 40} {
		dry.cycle(t, m, j)
	}
	if len(dry.slurm.calls) != 0 {
		t.Fatalf("dry run acted: %v", dry.slurm.calls)
	}
	real := newRig(t, testPolicy, st)
	real.start = dry.start
	// The real ladder restarts at +41m with the policy's spacing:
	// notify 41, warn 51, checkpoint 71 (min_warning), reclaim 91.
	real.cycle(t, 41, j)
	real.cycle(t, 51, j)
	if n, w := real.hook.count("notify"), real.hook.count("warn"); n != 1 || w != 1 {
		t.Fatalf("real notify %d, warn %d after leaving dry-run; want 1 each", n, w)
	}
	real.cycle(t, 70, j)
	if len(real.slurm.calls) != 0 {
		t.Fatalf("acted %v before min_warning after the real warning", real.slurm.calls)
	}
	real.cycle(t, 71, j)
	real.cycle(t, 90, j)
	if c, k := real.slurm.count("checkpoint"), real.slurm.count("reclaim"); c != 1 || k != 0 {
		t.Fatalf("at +90m: %v, want the checkpoint only", real.slurm.calls)
	}
	real.cycle(t, 91, j)
	if k := real.slurm.count("reclaim"); k != 1 {
		t.Fatalf("at +91m: %v, want the reclaim", real.slurm.calls)
	}
}

func TestNextStepSkipsForbiddenReclaim(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	var got []*action.Request
	r.esc.Actuators["webhook"] = actFunc(func(req *action.Request) { got = append(got, req) })
	r.cycle(t, 0, idle("700", "bob", "prod", r.start))
	if len(got) != 1 || got[0].NextStep != "" {
		t.Fatalf("warning in a tier without reclaim announces %+v", got)
	}
}

type actFunc func(req *action.Request)

func (actFunc) Name() string { return "webhook" }
func (f actFunc) Act(_ context.Context, req *action.Request) (string, error) {
	f(req)
	return "ok", nil
}

func TestFindingMetrics(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	m := r.esc.Metrics
	old := idle("1", "bob", "dev", r.start) // open before the daemon started
	old.Start = r.start.Add(-time.Hour)
	old.WastedGPUHours = 5
	m.ObserveFindings(r.start, []finding.Finding{old})
	fresh := idle("2", "eve", "dev", r.start)
	fresh.Start, fresh.WastedGPUHours = r.start.Add(time.Minute), 0.5
	old.WastedGPUHours = 5.25
	m.ObserveFindings(r.start.Add(5*time.Minute), []finding.Finding{old, fresh})
	if v := gathered(t, r.reg, schema.AnalyzerWastedGPUSeconds, "n1", "cpu_only", "t"); v != 0.75*3600 {
		t.Errorf("wasted counter = %v GPU-seconds, want (0.25 h growth of the old finding + 0.5 h of the new one) × 3600", v)
	}
	if v := gathered(t, r.reg, schema.AnalyzerJobWastedGPUSeconds, "n1", "1", "bob", "t", "cpu_only"); v != 5.25*3600 {
		t.Errorf("job gauge = %v", v)
	}
	if v := gathered(t, r.reg, schema.AnalyzerFindings, "n1", "cpu_only", "warning", "t"); v != 2 {
		t.Errorf("findings gauge = %v", v)
	}
	m.ObserveFindings(r.start.Add(10*time.Minute), nil)
	if n := testutil.CollectAndCount(m.Found, schema.AnalyzerFindings.Name); n != 0 {
		t.Errorf("closed findings still published: %d series", n)
	}
}

// gathered reads one series of metric, by its label values in catalogue
// order, from reg (-1 when absent).
func gathered(t *testing.T, reg *prometheus.Registry, metric *schema.Metric, values ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric.Name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i, name := range metric.Labels {
				if got[name] != values[i] {
					continue series
				}
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	return -1
}

// A data gap pauses an escalation: the finding, carried over the gap marked
// unknown, is not acted on, and when the data is back its episode goes on
// from the step it had reached, without warning the user again from the
// first step.
func TestEpisodeSurvivesDataGap(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	j := idle("131", "bob", "dev", r.start)
	r.cycle(t, 0, j)  // notify
	r.cycle(t, 10, j) // warn
	gapped := j
	gapped.End = r.start.Add(11 * time.Minute)
	gapped.Evidence = map[string]float64{finding.EvidenceUnknown: 1}
	for m := 12; m < 30; m += 3 {
		now := r.start.Add(time.Duration(m) * time.Minute)
		res, err := r.esc.Cycle(context.Background(), now, []finding.Finding{gapped})
		if err != nil {
			t.Fatal(err)
		}
		if res.Unknown != 1 || res.Steps != 0 {
			t.Fatalf("+%dm in the gap: %+v, want the finding unknown and no step", m, res)
		}
	}
	r.cycle(t, 30, j)
	if want := "[notify 131 warn 131]"; fmt.Sprint(r.hook.calls) != want {
		t.Errorf("webhook after the gap = %v, want %s (the episode went on)", r.hook.calls, want)
	}
	if want := "[checkpoint 131]"; fmt.Sprint(r.slurm.calls) != want {
		t.Errorf("slurm after the gap = %v, want %s (the ladder resumed where it was)", r.slurm.calls, want)
	}
}
