package report_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// gpuwatchBinary builds cmd/gpuwatch once per test run.
func gpuwatchBinary(t *testing.T) string {
	t.Helper()
	return testtool.Binary(t, "cmd/gpuwatch")
}

func TestPreviewCommand(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the gpuwatch binary")
	}
	bin := gpuwatchBinary(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "state.db")
	want := fill(t, db)
	cfg := filepath.Join(dir, "report.yml")
	if err := os.WriteFile(cfg, []byte("timezone: Europe/Berlin\ncurrency: EUR\nprices: {A100: 1.8}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, out []byte)
	}{
		{name: "json", args: []string{"--team", "vision", "--format", "json"}, check: func(t *testing.T, out []byte) {
			var r report.Report
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatal(err)
			}
			e := want["vision"]
			if r.Team != "vision" || r.Period.Label != "2026-W47" || r.TimeZone != "Europe/Berlin" ||
				report.GPUHours(r.Totals.AllocatedGPUHours) != report.GPUHours(e.alloc) ||
				report.GPUHours(r.Totals.WastedGPUHours) != report.GPUHours(e.wasted) || len(r.Daily) != 7 {
				t.Errorf("report %+v, want %+v", r.Totals, e)
			}
		}},
		{name: "text", args: []string{"--team", "nlp", "--format", "text"}, check: func(t *testing.T, out []byte) {
			if !strings.Contains(string(out), "team nlp, week 2026-W47") || !strings.Contains(string(out), report.GPUHours(want["nlp"].alloc)+" GPU-hours") {
				t.Errorf("text:\n%s", out)
			}
		}},
		{name: "fleet html", args: []string{"--format", "html"}, check: func(t *testing.T, out []byte) {
			s := string(out)
			if !strings.Contains(s, "Whole fleet") || strings.Count(s, `src="data:image/png;base64,`) != 2 || strings.Contains(s, "cid:") {
				t.Errorf("fleet html lacks the title or embedded charts")
			}
		}},
		{name: "bad week", args: []string{"--week", "2026-W99"}, wantCode: 2},
		{name: "missing store", args: []string{"--storage.path", filepath.Join(dir, "nope.db")}, wantCode: 2},
		{name: "bad config", args: []string{"--config", db}, wantCode: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.out")
			args := append([]string{"report", "--storage.path", db, "--config", cfg, "--week", "2026-W47", "--out", out}, tc.args...)
			cmd := exec.Command(bin, args...)
			msg, err := cmd.CombinedOutput()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d: %s", code, tc.wantCode, msg)
			}
			if tc.check != nil {
				b, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, b)
			}
		})
	}
}
