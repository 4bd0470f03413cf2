// Package testtool finds the external programs that integration tests run
// (promtool, amtool, prometheus, alertmanager, mailpit, chromium, sbatch).
// The rule is the same everywhere: scripts/test.sh (and so CI) installs
// them all, so with CI set a missing program fails the test; elsewhere the
// test is skipped, saying why.
package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// Need returns the path of the named program: the first of paths that
// exists, else the one on $PATH.
func Need(t testing.TB, name string, paths ...string) string {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	Missing(t, name+" not installed; scripts/test.sh installs it")
	return ""
}

// Missing ends a test whose environment lacks something scripts/test.sh
// provides (a program, a running Slurm): a failure with CI set, else a skip
// that says why.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why + " (CI is set, so this is a broken setup)")
	}
	t.Skip(why)
}
