package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// messageCase is one mistake an operator makes on first contact, run as a
// real process: the exit code docs/exit-codes.md gives for it, what its
// message must name, and how many lines the output may have.
type messageCase struct {
	name  string
	args  []string
	env   []string // added; a name ending in = is removed
	code  int
	want  []string
	never []string
	// about, when set, is a word (any case) that exactly one line of the
	// output may hold: other lines (the cycle's summary) may follow.
	// Unset, the whole output is one line.
	about string
}

// TestMessages: each message names what is wrong (the flag, the URL or
// address, the cause) in one line, and the exit code is the documented one.
func TestMessages(t *testing.T) {
	promURL := startEmptyPrometheus(t)
	closed := testtool.FreeAddr(t) // nothing listens there
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() }) // after the cases, which run in parallel
	taken := busy.Addr().String()
	dir := t.TempDir()
	db := reportStore(t, filepath.Join(dir, "report.db"))
	policy := "../../deploy/examples/policy.yaml"
	// A web page where the API should be (a dashboard's URL, say).
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>Welcome</body></html>")
	}))
	t.Cleanup(page.Close)
	cases := []messageCase{
		{name: "analyze: nothing listens at --prometheus.url",
			args: []string{"analyze", "--prometheus.url=http://" + closed},
			code: 1, want: []string{"--prometheus.url", "http://" + closed, "connection refused"}},
		{name: "analyze: --prometheus.url with a path that is not the API's",
			args: []string{"analyze", "--prometheus.url=" + promURL + "/prometheus"},
			code: 2, want: []string{"--prometheus.url", promURL + "/prometheus", "404", "base URL"}},
		{name: "analyze: --prometheus.url host does not resolve",
			args: []string{"analyze", "--prometheus.url=http://prometheus.invalid:9090"},
			code: 1, want: []string{"--prometheus.url", "http://prometheus.invalid:9090", "not found"}},
		{name: "analyze: --prometheus.url is a web page, not a Prometheus",
			args: []string{"analyze", "--prometheus.url=" + page.URL},
			code: 2, want: []string{"--prometheus.url", page.URL, "not the Prometheus API's JSON"}},
		{name: "exporter: port in use, and no 'started' before the failure",
			args: []string{"exporter", "--source=sim", "--web.listen-address=" + taken},
			code: 1, want: []string{"--web.listen-address", taken, "address already in use"}, never: []string{"started"}},
		{name: "analyzer: port in use, and no 'started' before the failure",
			args: []string{"analyzer", "--policy.file=" + policy, "--storage.path=" + filepath.Join(dir, "a.db"),
				"--prometheus.url=" + promURL, "--web.listen-address=" + taken},
			code: 1, want: []string{"--web.listen-address", taken, "address already in use"}, never: []string{"started"}},
		{name: "analyzer --once: Slurm installed but not configured is one line",
			args: []string{"analyzer", "--once", "--policy.file=" + policy, "--storage.path=" + filepath.Join(dir, "b.db"),
				"--prometheus.url=" + promURL},
			env:  []string{"SLURM_CONF="},
			code: 0, want: []string{"Slurm is installed but not reachable", "SLURM_CONF", "squeue"}, never: []string{"squeue: error"}, about: "slurm"},
		{name: "report --team for a week without data says from when data exists",
			args: []string{"report", "--storage.path=" + db, "--team=ml", "--week=2026-W40", "--format=text", "--out=" + filepath.Join(dir, "r.txt")},
			code: 0, want: []string{`no usage for team "ml" in 2026-W40`, "from 2026-11-25 to 2026-11-27", "--week"}, about: "usage"},
		{name: "report --team that has never had data",
			args: []string{"report", "--storage.path=" + db, "--team=nobody", "--week=2026-W48", "--format=text", "--out=" + filepath.Join(dir, "r2.txt")},
			code: 0, want: []string{`no usage for team "nobody"`, "other teams from 2026-11-24 to 2026-11-27", "teams file"}, about: "usage"},
	}
	noAuth := filepath.Join(dir, "web-noauth.yml")
	if err := os.WriteFile(noAuth, []byte("http_server_config:\n  http2: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, messageCase{name: "check-config: a web config that enables no authentication",
		args: []string{"check-config", "--web.config.file=" + noAuth},
		code: 0, want: []string{"warning: " + noAuth + " enables no authentication", "127.0.0.1", "basic_auth_users"}, about: "warning"})
	if _, err := exec.LookPath("squeue"); err != nil {
		testtool.Missing(t, "squeue not installed (slurm-wlm); scripts/test.sh installs it")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own process, files and addresses
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, self, tc.args...)
			cmd.Env = environ(append([]string{asMain + "=1"}, tc.env...))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.Stdout = &bytes.Buffer{}
			_ = cmd.Run()
			out := stderr.String()
			t.Logf("exit %d: %s", cmd.ProcessState.ExitCode(), out)
			if code := cmd.ProcessState.ExitCode(); code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if tc.about == "" && len(lines) != 1 {
				t.Errorf("want one line, got %d:\n%s", len(lines), out)
			}
			if tc.about != "" {
				n := 0
				for _, l := range lines {
					if strings.Contains(strings.ToLower(l), tc.about) {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d lines about %s, want 1:\n%s", n, tc.about, out)
				}
			}
		})
	}
}

// environ is the test's environment with add applied: NAME=VALUE sets,
// NAME= removes.
func environ(add []string) []string {
	drop := map[string]bool{}
	for _, a := range add {
		name, _, _ := strings.Cut(a, "=")
		drop[name] = true
	}
	var env []string
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if !drop[name] {
			env = append(env, e)
		}
	}
	for _, a := range add {
		if !strings.HasSuffix(a, "=") {
			env = append(env, a)
		}
	}
	return env
}

// reportStore writes three days of usage for the teams ml and vision.
func reportStore(t *testing.T, path string) string {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	if err := st.AddUsage(context.Background(), []store.Usage{
		{Start: t0, End: t0.Add(time.Hour), Hostname: "n1", Job: "1", User: "ana", Team: "ml", GPUs: 2, AllocatedGPUHours: 2, ActiveGPUHours: 1},
		{Start: t0.Add(48 * time.Hour), End: t0.Add(49 * time.Hour), Hostname: "n1", Job: "2", User: "ana", Team: "ml", GPUs: 1, AllocatedGPUHours: 1},
		{Start: t0.Add(-24 * time.Hour), End: t0.Add(-23 * time.Hour), Hostname: "n2", Job: "3", User: "bo", Team: "vision", GPUs: 1, AllocatedGPUHours: 1},
	}); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEmptyPrometheus runs a real Prometheus with no data on a free port.
func startEmptyPrometheus(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("prometheus"); err != nil {
		testtool.Missing(t, "prometheus not installed; scripts/test.sh installs it")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte("global:\n  scrape_interval: 30s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testtool.FreeAddr(t)
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	client := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := client.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
	}
	t.Fatalf("prometheus at %s not ready after 30s:\n%s", url, logs.String())
	return ""
}
