package execrun

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "wrapper")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChildHoldingStdoutDoesNotHold: a wrapper whose child keeps stdout
// open (the shape of a site's squeue wrapper that runs sleep) returns at
// the timeout, with its whole process group killed.
func TestChildHoldingStdoutDoesNotHold(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	for name, body := range map[string]string{
		"background child":  "sleep 300 & echo $! > " + pidFile + "; echo partial; exit 0",
		"foreground sleep":  "echo $$ > " + pidFile + "; sleep 300",
		"grandchild":        "sh -c 'sleep 300 & echo $! > " + pidFile + "; wait' & wait",
		"ignores sigterm":   "trap '' TERM; echo $$ > " + pidFile + "; sleep 300",
		"closes stdin only": "exec 0<&-; echo $$ > " + pidFile + "; sleep 300",
	} {
		t.Run(name, func(t *testing.T) {
			_ = os.Remove(pidFile)
			r := Exec{Timeout: 300 * time.Millisecond, WaitDelay: 300 * time.Millisecond}
			start := time.Now()
			_, err := r.Run(context.Background(), script(t, body))
			took := time.Since(start)
			if took > 3*time.Second {
				t.Fatalf("returned after %s, timeout 300ms", took)
			}
			if name != "background child" && err == nil {
				t.Fatalf("no error after the timeout")
			}
			// Whatever was started is gone (or a zombie) soon after.
			b, err := os.ReadFile(pidFile)
			if err != nil {
				return
			}
			pid := strings.TrimSpace(string(b))
			testtool.Eventually(t, 5*time.Second, "process "+pid+" to end after the timeout", func() (bool, error) {
				if _, err := os.Stat("/proc/" + pid); err != nil {
					return true, nil
				}
				st, _ := os.ReadFile("/proc/" + pid + "/stat")
				return strings.Contains(string(st), ") Z "), nil
			})
		})
	}
}

func TestOutputBoundedAndStderrFirstLine(t *testing.T) {
	r := Exec{Timeout: 10 * time.Second}
	if _, err := r.Run(context.Background(), script(t, "head -c 70000000 /dev/zero")); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("70 MB of output: %v", err)
	}
	_, err := r.Run(context.Background(), script(t, "echo 'squeue: error: Invalid job id specified' >&2; echo 'middle line' >&2; echo 'squeue: fatal: last' >&2; exit 1"))
	if err == nil || !strings.Contains(err.Error(), "Invalid job id specified") || !strings.Contains(err.Error(), "fatal: last") || strings.Contains(err.Error(), "middle line") {
		t.Fatalf("err = %v", err)
	}
	out, err := r.Run(context.Background(), "/bin/echo", "a;b", "$(id)")
	if err != nil || string(out) != "a;b $(id)\n" {
		t.Fatalf("argument list: %q %v", out, err)
	}
}
