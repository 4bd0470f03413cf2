package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SubmitSignalJob submits a batch job to the test cluster that runs until
// cancelled and appends "USR1" to marker for each SIGUSR1 it receives, and
// returns once the job's shell has installed its trap. Slurm reports a job
// RUNNING before its script's first line has run: a signal sent in that
// window kills the job (FAILED), so a test that signals it right after
// submitting must wait for the trap, not for the state.
func SubmitSignalJob(t testing.TB, dir, name string, sbatchArgs ...string) (id, marker string) {
	t.Helper()
	marker = filepath.Join(dir, name+".signals")
	ready := filepath.Join(dir, name+".ready")
	script := filepath.Join(dir, name+".sh")
	body := "#!/bin/sh\ntrap 'echo USR1 >> " + marker + "' USR1\n: > " + ready + "\nwhile :; do sleep 1 & wait $!; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--parsable", "--job-name=" + name, "--gres=gpu:1", "--output=/dev/null"}, sbatchArgs...)
	out, err := exec.Command("sbatch", append(args, script)...).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	id = strings.SplitN(strings.TrimSpace(string(out)), ";", 2)[0]
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return id, marker
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never started its script (%s)", id, ready)
		}
	}
}
