package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStorageFlagsOneMeaning: --storage.path is the state database (a
// SQLite file) in every command and --tsdb.path the embedded telemetry
// store (a folder); each given the other kind says so in one line and
// names the flag that takes it, instead of "disk I/O error" from SQLite or
// a TSDB created inside a database's path.
func TestStorageFlagsOneMeaning(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	data := analyzeStore(t, from)                            // as the agent and the demo lay it out: DIR/tsdb ...
	db := reportStore(t, filepath.Join(data, "gpuwatch.db")) // ... and DIR/gpuwatch.db
	other := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(other, []byte("not a store\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	window := []string{"--from=" + from.Format(time.RFC3339), "--to=" + from.Add(3*time.Hour).Format(time.RFC3339)}
	policy := "../../deploy/examples/policy.yaml"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"report given the data folder", []string{"report", "--storage.path=" + data, "--week=2026-W48", "--out=" + filepath.Join(t.TempDir(), "r.html")},
			[]string{"--storage.path " + data + " is a folder", "--storage.path=" + db, "--tsdb.path"}},
		{"audit given the data folder", []string{"audit", "--storage.path=" + data},
			[]string{"is a folder", "--storage.path=" + db, "--tsdb.path"}},
		{"analyzer given the data folder", []string{"analyzer", "--once", "--policy.file=" + policy, "--storage.path=" + data, "--prometheus.url=http://127.0.0.1:1"},
			[]string{"is a folder", "--storage.path=" + db}},
		{"agent given the data folder as its state database", []string{"agent", "--source=sim", "--storage.path=" + data},
			[]string{"is a folder", "--storage.path=" + db, "--tsdb.path"}},
		{"analyze given the state database as --tsdb.path", append([]string{"analyze", "--tsdb.path=" + db}, window...),
			[]string{"--tsdb.path " + db + " is a SQLite file", "--storage.path"}},
		{"plan given a plain file as --tsdb.path", append([]string{"plan", "--tsdb.path=" + other}, window...),
			[]string{"--tsdb.path " + other + " is a file", "folder"}},
		{"analyze with the old --storage.path for telemetry", append([]string{"analyze", "--storage.path=" + data}, window...),
			[]string{"--storage.path names the state database", "--tsdb.path=" + data}},
		{"job with the old --storage.path for telemetry", []string{"job", "4242", "--storage.path=" + data, "--slurm.squeue="},
			[]string{"--storage.path names the state database", "job reads", "--tsdb.path=" + data}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			out := captureStdout(t, func() {
				if code := run(tc.args, &stderr); code != 2 {
					t.Errorf("exit %d, want 2", code)
				}
			})
			msg := stderr.String()
			if n := strings.Count(strings.TrimSpace(msg), "\n"); n != 0 || out != "" {
				t.Errorf("want one line on stderr and nothing on stdout, got:\n%s%s", msg, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q: %s", w, msg)
				}
			}
		})
	}
}

// TestTSDBPathTakesTheStoreOrItsDataFolder: analyze reads the same store
// through the agent's --tsdb.path (DIR/tsdb) and through the data folder
// above it (the demo's --out), and report reads the database beside it.
func TestTSDBPathTakesTheStoreOrItsDataFolder(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	data := analyzeStore(t, from)
	db := reportStore(t, filepath.Join(data, "gpuwatch.db"))
	window := []string{"--format=json", "--from=" + from.Format(time.RFC3339), "--to=" + from.Add(3*time.Hour).Format(time.RFC3339)}
	var outs []string
	for _, path := range []string{data, filepath.Join(data, "tsdb")} {
		var stderr bytes.Buffer
		outs = append(outs, captureStdout(t, func() {
			if code := run(append([]string{"analyze", "--tsdb.path=" + path}, window...), &stderr); code != 0 {
				t.Errorf("--tsdb.path=%s: exit %d: %s", path, code, stderr.String())
			}
		}))
	}
	if outs[0] != outs[1] || !strings.Contains(outs[0], `"cpu_only"`) {
		t.Errorf("the data folder and its tsdb/ answer differently or without the finding:\n%s\n%s", outs[0], outs[1])
	}
	var stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "r.txt")
	if code := run([]string{"report", "--storage.path=" + db, "--week=2026-W48", "--format=text", "--out=" + out}, &stderr); code != 0 {
		t.Errorf("report --storage.path=%s: exit %d: %s", db, code, stderr.String())
	}
}
