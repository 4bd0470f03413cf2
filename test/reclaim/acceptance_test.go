package reclaim

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// The policy of the end-to-end test. The last tier reclaims every job of
// this test: a finding whose partition is unknown must never reach it. The
// Slurm cluster is shared, so it is kept to this test's jobs by their names,
// which the operator (the test) trusts.
const acceptancePolicy = `
dry_run: false
min_warning: 20s
channels:
  webhook: {url: %q}
trust_workload_keys: {job_names: true}
tiers:
  - name: production
    match: {partitions: [prod]}
    reclaim: false
    rules:
      - pattern: cpu_only
        steps: [{action: notify, after: 0s}, {action: warn, after: 0s}, {action: reclaim, after: 30s}]
  - name: development
    match: {partitions: [dev]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: notify, after: 0s}, {action: warn, after: 0s}, {action: reclaim, after: 30s}]
  - name: everything-else
    match: {job_names: ["accept-*"]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 30s}]
exemptions:
  - {job: %q, reason: acceptance}
`

const acceptanceConfig = `
step: 30s
patterns:
  cpu_only: {min_duration: 30s}
`

// TestOwnersFactsEndToEnd: real Slurm with partitions prod and dev, jobs
// mapped by the shipped prolog, the simulated exporter (idle GPUs) scraped
// by a real Prometheus, and the real `gpuwatch analyzer` binary deciding on
// the engine's own findings. The prod job is warned and never reclaimed;
// the dev job is warned, then cancelled; the exempt job is left alone. A
// second analyzer whose squeue fails reclaims nothing and its audit names
// the missing fact.
func TestOwnersFactsEndToEnd(t *testing.T) {
	t.Parallel()
	slurm(t, 3)
	promBin := testtool.Need(t, "prometheus")
	mapDir := jobMapDir(t)
	bin := gpuwatchBinary(t)
	partitions(t, "prod", "dev")
	dir := t.TempDir()
	h := newHook(t)

	prod, prodMarker := submitTo(t, dir, "accept-prod", "prod")
	dev, _ := submitTo(t, dir, "accept-dev", "dev")
	exempt, exemptMarker := submitTo(t, dir, "accept-exempt", "dev")
	for _, j := range []string{prod, dev, exempt} {
		waitMapped(t, mapDir, j)
	}

	gpus := 8
	if n, err := strconv.Atoi(os.Getenv("GPUWATCH_SLURM_GPUS")); err == nil && n > 0 {
		gpus = n
	}
	// The simulated node is the Slurm node the jobs run on: the analyzer
	// proves each target by the job's node list before it acts.
	node := jobFinding(t, dev, time.Now()).Hostname
	scenario := write(t, dir, "scenario.yaml", fmt.Sprintf(
		"name: acceptance\norigin: 2026-01-01T00:00:00Z\nfleet:\n  - {hostname: %s, model: A100-SXM4-80GB, gpus: %d}\n", node, gpus))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exporter := testtool.FreeAddr(t)
	startProcess(ctx, t, dir, "exporter", bin, "exporter", "--source=sim", "--sim.scenario="+scenario,
		"--hpc-job-mapping-dir="+mapDir, "--collect-interval=1s", "--web.listen-address="+exporter)
	waitReady(t, "http://"+exporter+"/metrics")
	prom := testtool.FreeAddr(t)
	promConf := write(t, dir, "prometheus.yml", fmt.Sprintf(
		"global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs: [{targets: [%q]}]\n", exporter))
	startProcess(ctx, t, dir, "prometheus", promBin, "--config.file="+promConf,
		"--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address="+prom)
	waitReady(t, "http://"+prom+"/-/ready")

	policyFile := write(t, dir, "policy.yaml", fmt.Sprintf(acceptancePolicy, h.srv.URL, exempt))
	configFile := write(t, dir, "analyzer.yaml", acceptanceConfig)
	failing := write(t, dir, "squeue-down", "#!/bin/sh\necho 'squeue: error: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n")
	if err := os.Chmod(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "scancel")); err != nil {
		t.Fatal(err)
	}
	cancels := filepath.Join(dir, "scancel.log")
	good, down := filepath.Join(dir, "good.db"), filepath.Join(dir, "down.db")
	analyzer := func(db string, extra ...string) {
		t.Helper()
		args := append([]string{"analyzer", "--once", "--policy.file=" + policyFile, "--storage.path=" + db,
			"--prometheus.url=http://" + prom, "--analyzer.config=" + configFile,
			"--slurm.scancel=" + filepath.Join(dir, "scancel")}, extra...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "GPUWATCH_SCANCEL_LOG="+cancels)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("gpuwatch %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// One cycle per analysis step, just after the step ends, until the dev
	// job is gone (the engine needs two idle steps, then warn, then the
	// reclaim 30s later).
	deadline := time.Now().Add(5 * time.Minute)
	for jobState(t, dev) == "RUNNING" {
		if time.Now().After(deadline) {
			t.Fatalf("dev job %s still running after 5 minutes; webhook saw %v", dev, h.seen)
		}
		next := time.Now().Truncate(30 * time.Second).Add(32 * time.Second)
		time.Sleep(time.Until(next))
		analyzer(down, "--slurm.squeue="+failing)
		analyzer(good)
	}
	// One more cycle each: nothing changes for the others.
	time.Sleep(time.Until(time.Now().Truncate(30 * time.Second).Add(32 * time.Second)))
	analyzer(down, "--slurm.squeue="+failing)
	analyzer(good)

	for _, j := range []string{prod, exempt} {
		if st := jobState(t, j); st != "RUNNING" {
			t.Errorf("job %s is %s, want RUNNING", j, st)
		}
	}
	for _, m := range []string{prodMarker, exemptMarker} {
		if b, _ := os.ReadFile(m); len(b) != 0 {
			t.Errorf("%s: signalled %q", m, b)
		}
	}
	if got := lines(cancels); len(got) != 1 || got[0] != dev {
		t.Errorf("scancel calls = %q, want exactly one, of the dev job %s", got, dev)
	}
	h.mu.Lock()
	seen := strings.Join(h.seen, "\n")
	h.mu.Unlock()
	for _, want := range []string{"warn job " + dev + " ", "warn job " + prod + " "} {
		if !strings.Contains(seen, want) {
			t.Errorf("webhook never got %q:\n%s", want, seen)
		}
	}
	if strings.Contains(seen, "job "+exempt+" ") {
		t.Errorf("exempt job %s was notified:\n%s", exempt, seen)
	}

	steps := auditSteps(t, good)
	if got := steps[dev]; !strings.Contains(got, "development/warn:done") || !strings.Contains(got, "development/reclaim:done") {
		t.Errorf("audit of dev job %s = %s", dev, got)
	}
	if got := steps[prod]; !strings.Contains(got, "production/warn:done") || !strings.Contains(got, "production/reclaim:skipped") || strings.Contains(got, "reclaim:done") {
		t.Errorf("audit of prod job %s = %s", prod, got)
	}
	if got := steps[exempt]; got != "development/exempt:intended development/exempt:skipped" {
		t.Errorf("audit of exempt job %s = %s", exempt, got)
	}
	// The analyzer whose squeue fails: no tier, no warning, no reclaim, only
	// the notify step of the first tier, which it could not decide; the
	// audit says which fact was missing and why.
	downSteps, details := auditSteps(t, down), auditDetails(t, down)
	for _, j := range []string{prod, dev} {
		if got := downSteps[j]; got != "/facts:intended /facts:skipped /notify:intended /notify:done" {
			t.Errorf("squeue down: audit of job %s = %q, want the facts note and a notification only", j, got)
		}
		if d := details[j]; !strings.Contains(d, "partition") || !strings.Contains(d, "Unable to contact slurm controller") {
			t.Errorf("squeue down: job %s detail %q does not name the missing fact", j, d)
		}
	}
}

func jobMapDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("GPUWATCH_JOB_MAPPING_DIR"); d != "" {
		return d
	}
	if privateSlurmDir != "" {
		return filepath.Join(privateSlurmDir, "job-mapping")
	}
	return filepath.Join(filepath.Dir(filepath.Dir(slurmConf)), "job-mapping")
}

// waitMapped waits until the prolog wrote job into the mapping folder.
func waitMapped(t *testing.T, dir, job string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
			for _, l := range strings.Split(string(b), "\n") {
				if f := strings.Fields(l); len(f) > 0 && f[0] == job {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the prolog never mapped job %s in %s", job, dir)
		}
	}
}

func write(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func startProcess(ctx context.Context, t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4096 {
				b = b[len(b)-4096:]
			}
			t.Logf("---- %s log ----\n%s", name, b)
		}
	})
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered", url)
		}
	}
}

// auditSteps reads an analyzer's audit: per job, "tier/step:state" in order.
func auditSteps(t *testing.T, db string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ev := range auditEvents(t, db) {
		s := ev.Tier + "/" + ev.Step + ":" + string(ev.State)
		if out[ev.Job] != "" {
			s = " " + s
		}
		out[ev.Job] += s
	}
	return out
}

// auditDetails: per job, the details of its settled events.
func auditDetails(t *testing.T, db string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ev := range auditEvents(t, db) {
		out[ev.Job] += ev.Detail + " "
	}
	return out
}

func auditEvents(t *testing.T, db string) []audit.Event {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := lg.Events(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}
