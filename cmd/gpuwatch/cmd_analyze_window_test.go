package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// analyzeJSON runs `gpuwatch analyze --format=json` over [from, to) of
// the store in dir and returns its findings (job|pattern) and window.
func analyzeJSON(t *testing.T, dir, from, to string) ([]string, time.Time, time.Time) {
	t.Helper()
	var stderr bytes.Buffer
	out := captureStdout(t, func() {
		if code := run([]string{"analyze", "--tsdb.path=" + dir, "--format=json", "--from=" + from, "--to=" + to}, &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	var res struct {
		Findings []struct{ Pattern, Job string } `json:"findings"`
		Coverage struct{ From, To time.Time }    `json:"coverage"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	var fs []string
	for _, f := range res.Findings {
		fs = append(fs, f.Job+"|"+f.Pattern)
	}
	return fs, res.Coverage.From, res.Coverage.To
}

// TestAnalyzeWindowOnTheStepGrid: --from and --to off the 5-minute grid
// judge the steps that start in the window, as the daemon's cycles do
// (docs/accounting.md), and say which in the JSON coverage; --to=now ends
// at the last complete step, which is all the daemon has judged.
func TestAnalyzeWindowOnTheStepGrid(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	dir := analyzeStore(t, from)
	rfc := func(d time.Duration) string { return from.Add(d).Format(time.RFC3339) }
	want, _, _ := analyzeJSON(t, dir, rfc(0), rfc(3*time.Hour))
	if len(want) != 1 || want[0] != "4242|cpu_only" {
		t.Fatalf("on the grid: %v, want 4242|cpu_only", want)
	}
	got, f, to := analyzeJSON(t, dir, rfc(100*time.Second), rfc(2*time.Hour+59*time.Minute))
	if len(got) != 1 || got[0] != want[0] {
		t.Errorf("--from +1m40s: %v, want %v", got, want)
	}
	if !f.Equal(from.Add(5*time.Minute)) || !to.Equal(from.Add(3*time.Hour)) {
		t.Errorf("--from +1m40s --to +2h59m judged %s to %s, want the steps that start in it: +5m to +3h", f, to)
	}

	now := time.Now().UTC()
	live := analyzeStore(t, now.Add(-3*time.Hour))
	// The command reads its own clock: a step may end between the two.
	if _, _, to := analyzeJSON(t, live, "-3h", "now"); !to.Equal(now.Truncate(5*time.Minute)) && !to.Equal(time.Now().UTC().Truncate(5*time.Minute)) {
		t.Errorf("--to=now judged up to %s, want the end of the last complete step %s", to, now.Truncate(5*time.Minute))
	}
}
