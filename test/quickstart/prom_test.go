package quickstart

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// ---- processes ----

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// start runs a process with its output in dir/<name>.log, interrupts it when
// the test ends (killing it 10 s later), and prints the log's end if the
// test failed.
func start(ctx context.Context, t *testing.T, dir, name, bin string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logFile.Close()
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				if len(data) > 4096 {
					data = data[len(data)-4096:]
				}
				t.Logf("---- %s log (last 4 KiB) ----\n%s", name, data)
			}
		}
	})
}

// waitHTTP waits until u answers wantStatus.
func waitHTTP(ctx context.Context, t *testing.T, u string, wantStatus int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == wantStatus {
				return
			}
			err = fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no HTTP %d after 30s (last: %v)", u, wantStatus, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- Prometheus' HTTP API ----

type promClient struct{ base string }

// series counts the series an expression returns: an instant query, or a
// range query over the last minute (as a time-series panel asks).
func (p *promClient) series(expr string, instant bool) (int, error) {
	now := time.Now()
	path, params := "/api/v1/query", url.Values{"query": {expr}, "time": {fmt.Sprint(now.Unix())}}
	if !instant {
		path, params = "/api/v1/query_range", url.Values{"query": {expr},
			"start": {fmt.Sprint(now.Add(-time.Minute).Unix())}, "end": {fmt.Sprint(now.Unix())}, "step": {"5"}}
	}
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return 0, fmt.Errorf("query Prometheus: %w", err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, fmt.Errorf("decode Prometheus answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return 0, fmt.Errorf("Prometheus: %s", r.Error)
	}
	return len(r.Data.Result), nil
}

// up is the value of up for every target of the scrape jobs, by instance.
func (p *promClient) targetsUp(t *testing.T) map[string]string {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?" + url.Values{"query": {"up"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range r.Data.Result {
		if len(s.Value) == 2 {
			out[s.Metric["instance"]] = fmt.Sprint(s.Value[1])
		}
	}
	return out
}

// fill replaces Grafana's variables with vars (longest names first, so
// $job never eats into a longer name) and the interval macros with short
// windows: the test has a couple of minutes of data.
func fill(expr string, vars map[string]string) string {
	expr = strings.NewReplacer("$__rate_interval", "30s", "$__range_s", "120", "$__range", "2m", "$__interval", "5s").Replace(expr)
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, k := range names {
		expr = strings.ReplaceAll(expr, "${"+k+"}", vars[k])
		expr = strings.ReplaceAll(expr, "$"+k, vars[k])
	}
	return expr
}
