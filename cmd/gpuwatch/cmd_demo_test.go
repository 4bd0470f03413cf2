package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoCommand(t *testing.T) {
	small := filepath.Join("..", "..", "analyzer", "demo", "testdata", "demo-small.yaml")
	for _, tc := range []struct {
		name string
		args []string
		want int
		msgs []string
	}{
		{"short run", []string{"--length=6h", "--start=2026-11-16T00:00:00Z"}, 0, nil},
		{"step too coarse", []string{"--step=10m"}, 2, []string{"half the analyzer step"}},
		{"bad start", []string{"--start=monday"}, 2, []string{"--start"}},
		{"missing scenario", []string{"--scenario=" + filepath.Join(t.TempDir(), "absent.yaml")}, 2, []string{"--scenario", "absent.yaml"}},
		{"no fleet", []string{"--fleet.copies=0"}, 2, []string{"--fleet.copies", "at least 1"}},
		{"fleet too large", []string{"--fleet.copies=1000"}, 2, []string{"--fleet.copies", "4096"}},
		{"missing policy", []string{"--policy.file=" + filepath.Join(t.TempDir(), "absent.yaml")}, 2, []string{"--policy.file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"demo", "--exit", "--out=" + out}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "--scenario") {
				args = append(args, "--scenario="+small)
			}
			var stderr bytes.Buffer
			if got := run(args, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d; stderr:\n%s", got, tc.want, stderr.String())
			}
			for _, m := range tc.msgs {
				if !strings.Contains(stderr.String(), m) {
					t.Errorf("stderr lacks %q:\n%s", m, stderr.String())
				}
			}
			if tc.want != 0 {
				return
			}
			for _, f := range []string{"findings.json", "audit.json", "gpuwatch.db", "reports/fleet.html", "reports/llm.html", "dashboards/gpuwatch-fleet.json"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("output %s: %v", f, err)
				}
			}
		})
	}
}
