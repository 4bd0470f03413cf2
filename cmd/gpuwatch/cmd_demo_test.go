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

// TestDemoPrintsCommandsThatWork: the commands the demo prints for reading
// what it wrote run as printed (the embedded store through --tsdb.path, the
// state database through --storage.path), each with an answer on stdout.
func TestDemoPrintsCommandsThatWork(t *testing.T) {
	small := filepath.Join("..", "..", "analyzer", "demo", "testdata", "demo-small.yaml")
	out := filepath.Join(t.TempDir(), "demo out") // a space: the printed paths are quoted
	var stderr bytes.Buffer
	summary := captureStdout(t, func() {
		if code := run([]string{"demo", "--exit", "--out=" + out, "--sim.scenario=" + small, "--length=6h", "--start=2026-11-16T00:00:00Z"}, &stderr); code != 0 {
			t.Fatalf("demo: exit %d: %s", code, stderr.String())
		}
	})
	var cmds [][]string
	for _, l := range strings.Split(summary, "\n") {
		if rest, ok := strings.CutPrefix(l, "  gpuwatch "); ok {
			cmds = append(cmds, shellFields(t, rest))
		}
	}
	if len(cmds) != 3 {
		t.Fatalf("want 3 commands (analyze, report, audit), got %d:\n%s", len(cmds), summary)
	}
	for _, args := range cmds {
		stderr.Reset()
		got := captureStdout(t, func() {
			if code := run(args, &stderr); code != 0 {
				t.Errorf("%v: exit %d: %s", args, code, stderr.String())
			}
		})
		if strings.TrimSpace(got) == "" {
			t.Errorf("%v: nothing on stdout", args)
		}
	}
}

// shellFields splits a command line as a POSIX shell does words made of
// plain characters and single-quoted parts (all the demo prints).
func shellFields(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
