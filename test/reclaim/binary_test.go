package reclaim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// scancelWrapper logs each call to $GPUWATCH_SCANCEL_LOG and runs the real
// scancel. With GPUWATCH_SCANCEL_HANG=1, a plain cancel first writes its pid
// to $GPUWATCH_SCANCEL_LOG.hang and hangs, so the test can SIGKILL the
// analyzer between the intent and the cancel.
func scancelWrapper(args []string) int {
	log := os.Getenv("GPUWATCH_SCANCEL_LOG")
	if os.Getenv("GPUWATCH_SCANCEL_HANG") == "1" && len(args) == 1 {
		_ = os.WriteFile(log+".hang", []byte(fmt.Sprint(os.Getpid())), 0o644)
		time.Sleep(time.Hour)
	}
	if f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, strings.Join(args, " "))
		f.Close()
	}
	real := lookPath("scancel")
	cmd := exec.Command(real, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 1
	}
	return 0
}

func gpuwatchBinary(t *testing.T) string {
	t.Helper()
	return testtool.Binary(t, "cmd/gpuwatch")
}

// The real binary, the real cluster, the real clock (second-scale delays):
// `gpuwatch analyzer --once` warns, checkpoints, is SIGKILLed between the
// intent and the cancel, and the next run reconciles and cancels exactly once;
// `gpuwatch audit` then shows every step.
func TestAnalyzerBinary(t *testing.T) {
	t.Parallel()
	slurm(t, 1)
	bin := gpuwatchBinary(t)
	dir := t.TempDir()
	h := newHook(t)
	job, marker := submit(t, dir, "binary")
	policyFile := filepath.Join(dir, "policy.yaml")
	doc := fmt.Sprintf(`
dry_run: false
min_warning: 2s
retry: {initial_backoff: 0s} # the step the crash interrupted is retried by the next run
channels:
  webhook: {url: %q}
tiers:
  - name: development
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s}
          - {action: warn, after: 0s}
          - {action: checkpoint, after: 2s}
          - {action: reclaim, after: 4s}
`, h.srv.URL)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	fs, _ := json.Marshal([]finding.Finding{jobFinding(t, job, t0)})
	findings := filepath.Join(dir, "findings.json")
	if err := os.WriteFile(findings, fs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(dir, "scancel")); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "state.db")
	cancels := filepath.Join(dir, "scancel.log")
	analyzer := func(hang bool) *exec.Cmd {
		// A short lease: the restart after the crash takes the dead one's
		// over once it has seen it unrenewed that long.
		cmd := exec.Command(bin, "analyzer", "--once", "--lease.duration=2s", "--policy.file="+policyFile, "--storage.path="+db,
			"--findings.file="+findings, "--slurm.scancel="+filepath.Join(dir, "scancel"))
		cmd.Env = append(os.Environ(), "GPUWATCH_SCANCEL_LOG="+cancels)
		if hang {
			cmd.Env = append(cmd.Env, "GPUWATCH_SCANCEL_HANG=1")
		}
		return cmd
	}
	run := func() {
		t.Helper()
		if out, err := analyzer(false).CombinedOutput(); err != nil {
			t.Fatalf("gpuwatch analyzer --once: %v\n%s", err, out)
		}
	}
	// Runs of --once every 300ms until the step is due (the real clock).
	deadline := time.Now().Add(20 * time.Second)
	run() // notify, warn
	for b, _ := os.ReadFile(marker); !strings.Contains(string(b), "USR1"); b, _ = os.ReadFile(marker) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint signal")
		}
		time.Sleep(300 * time.Millisecond)
		run()
	}
	if l := lines(cancels); len(l) != 1 {
		t.Fatalf("scancel calls after the checkpoint: %v", l)
	}
	// Until the reclaim is due, a run ends by itself; the first run that
	// reaches the cancel hangs in the wrapper and is killed.
	var crashing *exec.Cmd
	var out strings.Builder
	hangPID := 0
	for hangPID == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reclaim never became due")
		}
		time.Sleep(300 * time.Millisecond)
		crashing = analyzer(true)
		out.Reset()
		crashing.Stdout, crashing.Stderr = &out, &out
		if err := crashing.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- crashing.Wait() }()
	wait:
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("analyzer run: %v\n%s", err, out.String())
				}
				break wait
			case <-time.After(50 * time.Millisecond):
				b, _ := os.ReadFile(cancels + ".hang")
				if _, err := fmt.Sscan(string(b), &hangPID); err == nil && hangPID > 0 {
					if err := crashing.Process.Signal(syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
					err := <-done
					_ = syscall.Kill(hangPID, syscall.SIGKILL) // the orphaned wrapper, which never cancelled
					var ee *exec.ExitError
					if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
						t.Fatalf("analyzer did not die of SIGKILL: %v", err)
					}
					break wait
				}
			}
		}
	}
	if st := jobState(t, job); st != "RUNNING" {
		t.Fatalf("job is %s before the restart", st)
	}
	run() // reconciles (not applied), then cancels
	run() // nothing left to do
	if st := jobState(t, job); st == "RUNNING" || st == "PENDING" {
		t.Fatalf("job still %s", st)
	}
	plain := plainCancels(cancels)
	if len(plain) != 1 || plain[0] != job {
		t.Fatalf("cancels = %v, want exactly one of job %s", plain, job)
	}
	var got []string
	for _, e := range auditCommand(t, bin, "--storage.path="+db, job) {
		got = append(got, e.Step+":"+string(e.State))
	}
	want := "notify:intended notify:done warn:intended warn:done checkpoint:intended checkpoint:done " +
		"reclaim:intended reclaim:failed reclaim:intended reclaim:done"
	if strings.Join(got, " ") != want {
		t.Fatalf("audit:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	table, err := exec.Command(bin, "audit", "--storage.path="+db).Output()
	if err != nil || !strings.Contains(string(table), "reconciled after restart") {
		t.Fatalf("audit table: %v\n%s", err, table)
	}
}

// The daemon runs cycles on its schedule and serves its metrics, which pass
// promtool's lint; SIGTERM stops it cleanly.
func TestAnalyzerDaemonMetrics(t *testing.T) {
	t.Parallel()
	slurm(t, 1)
	bin := gpuwatchBinary(t)
	dir := t.TempDir()
	// A real job: its target is proven, so it is warned (and, in dry run,
	// would be cancelled).
	job, _ := submit(t, dir, "metrics")
	f := jobFinding(t, job, time.Now())
	h := newHook(t)
	policyFile := filepath.Join(dir, "policy.yaml")
	doc := fmt.Sprintf(`
min_warning: 0s
channels:
  webhook: {url: %q}
tiers:
  - name: all
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 0s}]
`, h.srv.URL)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	fs, _ := json.Marshal([]finding.Finding{f})
	findings := filepath.Join(dir, "findings.json")
	if err := os.WriteFile(findings, fs, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testtool.FreePort(t))
	cmd := exec.Command(bin, "analyzer", "--policy.file="+policyFile, "--storage.path="+filepath.Join(dir, "state.db"),
		"--findings.file="+findings, "--schedule=@every 1s", "--web.listen-address="+addr)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var body string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(body, `gpuwatch_analyzer_actions_total{action="warn",hostname="`+f.Hostname+`",result="done"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed the warning:\n%s\nanalyzer output:\n%s", body, out.String())
		}
		time.Sleep(200 * time.Millisecond)
		b, err := httpGet("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		body = string(b)
	}
	// Dry-run (the default): the reclaim is counted as what would have been done.
	if !strings.Contains(body, `gpuwatch_analyzer_actions_total{action="reclaim",hostname="`+f.Hostname+`",result="dry_run"}`) {
		t.Errorf("no dry-run reclaim counted:\n%s", body)
	}
	if promtool := lookPath("promtool"); promtool != "" {
		lint := exec.Command(promtool, "check", "metrics")
		lint.Stdin = strings.NewReader(body)
		res, _ := lint.CombinedOutput()
		// The reclamation series must lint clean. (The dashboards' GPU-hour
		// series are named in hours, which promtool flags; they are not
		// defined here.)
		for _, l := range strings.Split(string(res), "\n") {
			switch {
			case strings.HasPrefix(l, schema.AnalyzerActions.Name), strings.HasPrefix(l, schema.AnalyzerEscalationCycles.Name),
				strings.HasPrefix(l, schema.AnalyzerLastEscalation.Name):
				t.Errorf("promtool: %s", l)
			case l != "":
				t.Logf("promtool: %s", l)
			}
		}
	} else if os.Getenv("CI") != "" {
		t.Error("promtool not installed; .ci/run builds it (test/prometheus/build.sh)")
	}
	// The web page shows the finding and the audit log.
	if page, err := httpGet("http://" + addr + "/findings.json"); err != nil || !strings.Contains(string(page), `"`+job+`"`) {
		t.Errorf("findings: %v\n%.2000s", err, page)
	}
	page, err := httpGet("http://" + addr + "/audit")
	if err != nil || !strings.Contains(string(page), job) || !strings.Contains(string(page), "dry_run") {
		t.Errorf("audit page: %v\n%.2000s", err, page)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("analyzer exit after SIGTERM: %v\n%s", err, out.String())
	}
}

// httpGet returns the body of a 200 answer.
func httpGet(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, err
}
