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
		{"missing scenario", []string{"--sim.scenario=" + filepath.Join(t.TempDir(), "absent.yaml")}, 2, []string{"--sim.scenario", "absent.yaml"}},
		// The old spelling, kept as a hidden alias.
		{"missing scenario, old spelling", []string{"--scenario=" + filepath.Join(t.TempDir(), "absent.yaml")}, 2, []string{"--sim.scenario", "absent.yaml"}},
		{"no fleet", []string{"--fleet.copies=0"}, 2, []string{"--fleet.copies", "at least 1"}},
		{"fleet too large", []string{"--fleet.copies=1000"}, 2, []string{"--fleet.copies", "4096"}},
		{"missing policy", []string{"--policy.file=" + filepath.Join(t.TempDir(), "absent.yaml")}, 2, []string{"--policy.file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"demo", "--exit", "--out=" + out}, tc.args...)
			if !strings.Contains(strings.Join(tc.args, " "), "scenario=") {
				args = append(args, "--sim.scenario="+small)
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

func TestDemoStateDir(t *testing.T) {
	noTemp := func(string, string) (string, error) { t.Fatal("no temporary folder expected"); return "", nil }
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"XDG state home", map[string]string{"XDG_STATE_HOME": "/var/state", "HOME": "/home/a"}, "/var/state/gpuwatch/demo"},
		{"home", map[string]string{"HOME": "/home/a"}, "/home/a/.local/state/gpuwatch/demo"},
		{"relative XDG is ignored", map[string]string{"XDG_STATE_HOME": "state", "HOME": "/home/a"}, "/home/a/.local/state/gpuwatch/demo"},
	}
	for _, tc := range tests {
		got, err := demoStateDir(env(tc.env), noTemp)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	tmp := t.TempDir()
	got, err := demoStateDir(env(nil), func(dir, pattern string) (string, error) { return os.MkdirTemp(tmp, pattern) })
	if err != nil || filepath.Dir(got) != tmp || !strings.HasPrefix(filepath.Base(got), "gpuwatch-demo-") {
		t.Errorf("no home: %q, %v; want a new folder in %s", got, err, tmp)
	}
}

// TestDemoWritesNothingInWorkingDirectory: without --out the demo writes
// under the state directory, not into the folder it runs in.
func TestDemoWritesNothingInWorkingDirectory(t *testing.T) {
	small, err := filepath.Abs(filepath.Join("..", "..", "analyzer", "demo", "testdata", "demo-small.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	state, work := t.TempDir(), t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Chdir(work)
	var stderr bytes.Buffer
	if got := run([]string{"demo", "--exit", "--length=6h", "--start=2026-11-16T00:00:00Z", "--sim.scenario=" + small}, &stderr); got != 0 {
		t.Fatalf("exit %d; stderr:\n%s", got, stderr.String())
	}
	if entries, _ := os.ReadDir(work); len(entries) != 0 {
		t.Errorf("the demo wrote %d entries into the working directory", len(entries))
	}
	if _, err := os.Stat(filepath.Join(state, "gpuwatch", "demo", "findings.json")); err != nil {
		t.Errorf("no findings in the state directory: %v", err)
	}
}
