package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	slurmjobs "github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The policy of these tests: short delays under an injected clock.
//
//	production (partition prod): warn only, reclaim not allowed
//	development (partition debug, the test cluster's): notify, warn at 0,
//	checkpoint (SIGUSR1) at 20m, reclaim at 40m; 10m minimum warning.
const slurmPolicy = `
dry_run: %v
min_warning: 10m
rate_limits: {reclaims_per_cycle: 5, reclaims_per_hour: 10}
channels:
  webhook: {url: "%s"}
tiers:
  - name: production
    match: {partitions: [prod]}
    reclaim: false
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 30m}]
  - name: development
    match: {partitions: [debug]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s}
          - {action: warn, after: 0s}
          - {action: checkpoint, after: 20m, signal: USR1}
          - {action: reclaim, after: 40m}
exemptions:
  - {job: "%s", reason: "acceptance test"}
`

type hook struct {
	mu   sync.Mutex
	seen []string
	srv  *httptest.Server
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p action.WebhookPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.seen = append(h.seen, p.Step+" "+p.Summary)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// idleFinding is what the engine reports for a job whose GPUs show idle
// telemetry (no process, 0% utilisation, no memory used) since it started.
// Built here from an idle snapshot's numbers, not by the engine: these tests
// are about the actuator and the audit; the partition comes from Slurm
// (acceptance_test.go runs the engine's own findings end to end).
func idleFinding(job string, now time.Time) finding.Finding {
	return finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Job: job, User: "root", Team: "acceptance",
		Kind: "batch", Hostname: "node1", Scheduler: "slurm", GPUs: []string{"GPU-0"}, Start: now.Add(-2 * time.Hour), End: now,
		WastedGPUHours: 2, Evidence: map[string]float64{"gpu_util_pct": 0, "fb_used_mib": 0, "gpu_processes": 0}}
}

// jobFinding is idleFinding for a job submitted to the real Slurm: its
// telemetry is the job's own, on its node since it started, as the target
// proof requires. Where and when a job ran is read once, while it runs.
func jobFinding(t *testing.T, job string, now time.Time) finding.Finding {
	t.Helper()
	jobSeen.Lock()
	defer jobSeen.Unlock()
	at, ok := jobSeen.m[job]
	if !ok {
		j, err := (&slurmjobs.Client{Runner: execrun.Exec{Timeout: 30 * time.Second}}).Job(context.Background(), job)
		if err != nil || j == nil {
			t.Fatalf("job %s: %+v %v", job, j, err)
		}
		nodes, err := slurmjobs.ExpandHostlist(j.Nodes)
		if err != nil || len(nodes) == 0 || j.Start.IsZero() {
			t.Fatalf("job %s: nodes %q (%v), start %s", job, j.Nodes, err, j.Start)
		}
		at = jobWhere{nodes[0], j.Start}
		jobSeen.m[job] = at
	}
	f := idleFinding(job, now)
	f.Hostname, f.Start = at.node, at.start
	return f
}

type jobWhere struct {
	node  string
	start time.Time
}

var jobSeen = struct {
	sync.Mutex
	m map[string]jobWhere
}{m: map[string]jobWhere{}}

func escalator(t *testing.T, dbPath, doc string, runner execrun.Runner) (*daemon.Escalator, *audit.Log, *store.Store) {
	t.Helper()
	pol, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	acts := map[string]action.Actuator{"slurm": &action.Slurm{Runner: runner}}
	if pol.Channels.WebhookURL != "" {
		acts["webhook"] = &action.Webhook{URL: pol.Channels.WebhookURL}
	}
	res := &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: execrun.Exec{Timeout: 30 * time.Second}}}}
	return &daemon.Escalator{Policy: pol, Log: lg, Actuators: acts, Facts: res}, lg, st
}

func cycle(t *testing.T, e *daemon.Escalator, now time.Time, fs ...finding.Finding) {
	t.Helper()
	for i := range fs {
		fs[i].End = now
	}
	if _, err := e.Cycle(context.Background(), now, fs); err != nil {
		t.Fatal(err)
	}
}

// The test cluster has as many cores as the machine (two here): each test
// holds at most two jobs at a time.
func TestSlurmEscalation(t *testing.T) {
	t.Parallel()
	slurm(t, 2)
	dir := t.TempDir()
	h := newHook(t)
	idle, idleMarker := submit(t, dir, "idle")
	exempt, exemptMarker := submit(t, dir, "exempt")
	cancels := filepath.Join(dir, "scancel.log")
	e, lg, st := escalator(t, filepath.Join(dir, "state.db"), fmt.Sprintf(slurmPolicy, false, h.srv.URL, exempt), countingRunner{log: cancels})
	defer st.Close()
	t0 := time.Now().UTC().Truncate(time.Second)
	fs := func(now time.Time) []finding.Finding {
		return []finding.Finding{jobFinding(t, idle, now), jobFinding(t, exempt, now)}
	}
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }

	cycle(t, e, at(0), fs(at(0))...)
	if got := len(h.seen); got != 2 { // notify and warn for the idle job
		t.Fatalf("webhook got %d messages, want 2: %v", got, h.seen)
	}
	cycle(t, e, at(19), fs(at(19))...)
	if l := lines(cancels); len(l) != 0 {
		t.Fatalf("scancel before the checkpoint delay: %v", l)
	}
	cycle(t, e, at(20), fs(at(20))...)
	waitFile(t, idleMarker, "USR1")
	if st := jobState(t, idle); st != "RUNNING" {
		t.Fatalf("checkpointed job is %s, want RUNNING", st)
	}
	cycle(t, e, at(39), fs(at(39))...)
	if st := jobState(t, idle); st != "RUNNING" {
		t.Fatalf("job cancelled before the reclaim delay: %s", st)
	}
	cycle(t, e, at(40), fs(at(40))...)
	if st := jobState(t, idle); st == "RUNNING" || st == "PENDING" {
		t.Fatalf("idle job still %s after reclaim", st)
	}
	cycle(t, e, at(41), fs(at(41))...)
	cycle(t, e, at(90), fs(at(90))...)

	if st := jobState(t, exempt); st != "RUNNING" {
		t.Errorf("exempt job %s is %s", exempt, st)
	}
	if b, _ := os.ReadFile(exemptMarker); len(b) != 0 {
		t.Errorf("exempt job was signalled: %q", b)
	}
	want := []string{"--signal=USR1 --full " + idle, idle}
	if got := lines(cancels); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("scancel calls = %q, want %q", got, want)
	}
	checkAudit(t, lg, map[string]string{
		idle:   "notify:intended notify:done warn:intended warn:done checkpoint:intended checkpoint:done reclaim:intended reclaim:done",
		exempt: "exempt:intended exempt:skipped",
	})
}

func TestSlurmTierWithoutReclaim(t *testing.T) {
	t.Parallel()
	slurm(t, 1)
	dir := t.TempDir()
	h := newHook(t)
	partitions(t, "prod")
	prod, marker := submitTo(t, dir, "prod", "prod")
	cancels := filepath.Join(dir, "scancel.log")
	e, lg, st := escalator(t, filepath.Join(dir, "state.db"), fmt.Sprintf(slurmPolicy, false, h.srv.URL, "0"), countingRunner{log: cancels})
	defer st.Close()
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, m := range []int{0, 20, 40, 90} {
		now := t0.Add(time.Duration(m) * time.Minute)
		cycle(t, e, now, jobFinding(t, prod, now))
	}
	if st := jobState(t, prod); st != "RUNNING" {
		t.Fatalf("job in a tier without reclaim is %s", st)
	}
	if l := lines(cancels); len(l) != 0 {
		t.Fatalf("scancel ran: %v", l)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Fatalf("signalled: %q", b)
	}
	checkAudit(t, lg, map[string]string{prod: "warn:intended warn:done reclaim:intended reclaim:skipped"})
}

func checkAudit(t *testing.T, lg *audit.Log, want map[string]string) {
	t.Helper()
	evs, err := lg.Events(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byJob := map[string][]string{}
	for _, ev := range evs {
		byJob[ev.Job] = append(byJob[ev.Job], ev.Step+":"+string(ev.State))
	}
	for j, w := range want {
		if got := strings.Join(byJob[j], " "); got != w {
			t.Errorf("audit of job %s:\n got %s\nwant %s", j, got, w)
		}
	}
}

func TestSlurmDryRun(t *testing.T) {
	t.Parallel()
	slurm(t, 1)
	dir := t.TempDir()
	h := newHook(t)
	job, marker := submit(t, dir, "dry")
	cancels := filepath.Join(dir, "scancel.log")
	e, lg, st := escalator(t, filepath.Join(dir, "state.db"), fmt.Sprintf(slurmPolicy, true, h.srv.URL, "0"), countingRunner{log: cancels})
	defer st.Close()
	t0 := time.Now().UTC().Truncate(time.Second)
	for _, m := range []int{0, 20, 40, 60} {
		now := t0.Add(time.Duration(m) * time.Minute)
		cycle(t, e, now, jobFinding(t, job, now))
	}
	if st := jobState(t, job); st != "RUNNING" {
		t.Fatalf("dry-run job is %s", st)
	}
	if l := lines(cancels); len(l) != 0 {
		t.Fatalf("dry-run ran scancel: %v", l)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Fatalf("dry-run signalled the job: %q", b)
	}
	evs, _ := lg.Events(context.Background(), audit.Filter{Job: job})
	var dry []string
	for _, ev := range evs {
		if ev.State == audit.DryRun {
			dry = append(dry, ev.Step+": "+ev.Detail)
		}
	}
	if len(dry) != 2 || len(evs) == 0 || !strings.Contains(dry[0], "would send SIGUSR1 to job "+job) || !strings.Contains(dry[1], "would cancel/evict/kill job "+job) {
		t.Fatalf("dry-run audit = %q (all: %+v)", dry, evs)
	}
}

// TestHelperAnalyzer is not a test: it is the analyzer process that the
// crash test kills with SIGKILL in the middle of a reclaim.
func TestHelperAnalyzer(t *testing.T) {
	mode := os.Getenv("GPUWATCH_RECLAIM_HELPER")
	if mode == "" {
		t.Skip("helper process")
	}
	dir := os.Getenv("GPUWATCH_RECLAIM_DIR")
	marker := filepath.Join(dir, "killme")
	block := func() {
		_ = os.WriteFile(marker, []byte(mode), 0o644)
		time.Sleep(time.Hour) // until SIGKILL
	}
	r := countingRunner{log: filepath.Join(dir, "scancel.log")}
	if mode == "before" {
		r.before = block
	} else {
		r.after = block
	}
	doc, _ := os.ReadFile(filepath.Join(dir, "policy.yaml"))
	e, lg, _ := escalator(t, filepath.Join(dir, "state.db"), string(doc), r)
	now, _ := time.Parse(time.RFC3339, os.Getenv("GPUWATCH_RECLAIM_NOW"))
	f := jobFinding(t, os.Getenv("GPUWATCH_RECLAIM_JOB"), now)
	f.End = now
	res, err := e.Cycle(context.Background(), now, []finding.Finding{f})
	t.Logf("cycle: %+v %v", res, err)
	evs, _ := lg.Events(context.Background(), audit.Filter{Job: f.Job})
	for _, ev := range evs {
		t.Logf("audit: %s %s %s %s", ev.Step, ev.State, ev.Actuator, ev.Detail)
	}
	t.Fatal("the helper should have been killed")
}

// checkpointed says whether job's checkpoint step is done.
func checkpointed(t *testing.T, lg *audit.Log, job string) bool {
	t.Helper()
	evs, err := lg.Events(context.Background(), audit.Filter{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Step == action.StepCheckpoint && ev.State == audit.Done {
			return true
		}
	}
	return false
}

// A SIGKILL between the intent and the result of a cancel, then a restart:
// exactly one cancel and a complete audit, whether the kill came before
// scancel ran or after.
func TestSlurmCrashBetweenIntentAndResult(t *testing.T) {
	t.Parallel()
	slurm(t, 0)
	for _, mode := range []string{"before", "after"} {
		t.Run("killed "+mode+" scancel", func(t *testing.T) {
			t.Parallel()
			holdGPUs(t, 1)
			dir := t.TempDir()
			h := newHook(t)
			job, _ := submit(t, dir, "crash-"+mode)
			doc := fmt.Sprintf(slurmPolicy, false, h.srv.URL, "0")
			if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, "state.db")
			cancels := filepath.Join(dir, "scancel.log")
			t0 := time.Now().UTC().Truncate(time.Second)
			at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
			e, lg0, st := escalator(t, db, doc, countingRunner{log: cancels})
			for _, m := range []int{0, 20} {
				cycle(t, e, at(m), jobFinding(t, job, at(m)))
			}
			// The kill is to land in the reclaim: every step before it must be done.
			if !checkpointed(t, lg0, job) {
				evs, _ := lg0.Events(context.Background(), audit.Filter{Job: job})
				t.Fatalf("the checkpoint is not done: %+v", evs)
			}
			st.Close()

			child := exec.Command(os.Args[0], "-test.run=^TestHelperAnalyzer$", "-test.v")
			child.Env = append(os.Environ(), "GPUWATCH_RECLAIM_HELPER="+mode, "GPUWATCH_RECLAIM_DIR="+dir,
				"GPUWATCH_RECLAIM_JOB="+job, "GPUWATCH_RECLAIM_NOW="+at(40).Format(time.RFC3339))
			var out strings.Builder
			child.Stdout, child.Stderr = &out, &out
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			if err := waitFileErr(filepath.Join(dir, "killme"), mode); err != nil {
				_ = child.Process.Kill()
				_ = child.Wait()
				t.Fatalf("%v; helper output:\n%s", err, out.String())
			}
			if err := child.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()

			// Restart over the same store and the same cluster.
			e2, lg, st2 := escalator(t, db, doc, countingRunner{log: cancels})
			defer st2.Close()
			pending, _ := lg.Pending(context.Background())
			if len(pending) != 1 || pending[0].Step != "reclaim" {
				t.Fatalf("after the kill, pending = %+v (child output: %s)", pending, out.String())
			}
			for _, m := range []int{41, 42, 60} {
				cycle(t, e2, at(m), jobFinding(t, job, at(m)))
			}
			if st := jobState(t, job); st == "RUNNING" || st == "PENDING" {
				t.Fatalf("job still %s", st)
			}
			var plain []string
			for _, l := range lines(cancels) {
				if !strings.HasPrefix(l, "--signal") {
					plain = append(plain, l)
				}
			}
			if len(plain) != 1 {
				t.Fatalf("scancel %s ran %d times: %v", job, len(plain), plain)
			}
			evs, _ := lg.Events(context.Background(), audit.Filter{Job: job})
			var got []string
			for _, ev := range evs {
				if ev.Step == "reclaim" {
					got = append(got, string(ev.State))
				}
			}
			want := "intended done" // reconciled: the job is gone
			if mode == "before" {
				want = "intended failed intended done" // reconciled: not applied, then cancelled
			}
			if strings.Join(got, " ") != want {
				t.Fatalf("reclaim audit = %v, want %s", got, want)
			}
			if pending, _ := lg.Pending(context.Background()); len(pending) != 0 {
				t.Fatalf("steps left pending: %+v", pending)
			}
		})
	}
}
