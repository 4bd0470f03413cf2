package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestJobIsQuietByDefault: `gpuwatch job` on an embedded store prints its
// answer and nothing of the store's housekeeping (block, WAL and head
// messages the TSDB logs at INFO, 95 lines before the view on the demo's
// store); --log.level=debug still shows them, so they are lowered, not lost.
func TestJobIsQuietByDefault(t *testing.T) {
	dir := analyzeStore(t, time.Now().Add(-3*time.Hour).Truncate(time.Minute))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	job := func(extra ...string) (stdout, stderr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, self, append([]string{"job", "4242", "--tsdb.path=" + dir, "--format=json", "--slurm.squeue="}, extra...)...)
		cmd.Env = append(os.Environ(), asMain+"=1")
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Run(); err != nil {
			t.Fatalf("job %v: %v\n%s", extra, err, e.String())
		}
		return o.String(), e.String()
	}
	out, logs := job()
	var view struct {
		Job string `json:"job"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil || view.Job != "4242" {
		t.Fatalf("stdout is not the job's view (%v):\n%s", err, out)
	}
	if strings.TrimSpace(logs) != "" {
		t.Errorf("stderr holds log lines at the default level:\n%s", logs)
	}
	_, debug := job("--log.level=debug")
	if !strings.Contains(debug, "level=DEBUG") || !strings.Contains(strings.ToLower(debug), "wal") {
		t.Errorf("--log.level=debug lacks the store's lowered messages:\n%s", debug)
	}
	if strings.Contains(debug, "level=INFO") {
		t.Errorf("a library message kept INFO:\n%s", debug)
	}
}
