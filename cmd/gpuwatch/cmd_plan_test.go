package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestPlanCommand(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	dir := analyzeStore(t, from)
	window := []string{"--from=" + from.Format(time.RFC3339), "--to=" + from.Add(3*time.Hour).Format(time.RFC3339)}
	var stderr bytes.Buffer
	// Three hours of data are less than a plan needs by default: one line
	// says so, how much there is and when to ask again.
	if code := run(append([]string{"plan", "--tsdb.path=" + dir}, window...), &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "not enough history to plan: 3 h of hourly data") || strings.Count(strings.TrimSpace(stderr.String()), "\n") != 0 {
		t.Errorf("plan on 3 h: exit %d, stderr %q; want 1 and one line", code, stderr.String())
	}
	stderr.Reset()
	window = append(window, "--plan.min-history=3h")
	out := captureStdout(t, func() {
		if code := run(append([]string{"plan", "--tsdb.path=" + dir, "--format=json"}, window...), &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	var res struct {
		Hours       int     `json:"hours"`
		Coverage    float64 `json:"coverage"`
		Held        int     `json:"gpus_held"`
		Needed      int     `json:"gpus_needed"`
		Allocations []struct {
			Job, Host, Recommendation string
		} `json:"allocations"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	// The store holds one GPU, held by job 4242 from minute 10 on and never used.
	if res.Hours != 3 || res.Held != 1 || res.Coverage < 0.99 || len(res.Allocations) != 1 ||
		res.Allocations[0].Job != "4242" || res.Allocations[0].Host != "node-7" || res.Allocations[0].Recommendation != "idle" {
		t.Fatalf("plan %+v, want 3 h, 1 GPU held, 4242@node-7 idle", res)
	}
	out = captureStdout(t, func() {
		if code := run(append([]string{"plan", "--tsdb.path=" + dir, "--time-zone=Europe/Berlin"}, window...), &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	if !strings.Contains(out, "coverage 100 %") || !strings.Contains(out, "4242") {
		t.Errorf("table output:\n%s", out)
	}
}

func TestPlanCommandUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no source", []string{"plan"}, "exactly one of --prometheus.url and --tsdb.path"},
		{"short window", []string{"plan", "--tsdb.path=" + dir, "--from=-1h", "--to=-2h"}, "must be after"},
		{"bad load", []string{"plan", "--tsdb.path=" + dir, "--plan.target-load=1.5"}, "--plan.target-load"},
		{"bad headroom", []string{"plan", "--tsdb.path=" + dir, "--plan.compute-headroom=0.5"}, "headroom"},
		{"bad zone", []string{"plan", "--tsdb.path=" + dir, "--time-zone=Mars/Olympus"}, "--time-zone"},
		{"bad format", []string{"plan", "--tsdb.path=" + dir, "--format=xml"}, "format"},
		{"min history under an hour", []string{"plan", "--tsdb.path=" + dir, "--plan.min-history=30m"}, "--plan.min-history 30m0s: want at least 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("stderr lacks %q: %s", tc.msg, stderr.String())
			}
		})
	}
}
