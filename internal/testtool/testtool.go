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
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not installed: scripts/test.sh installs it, and CI is set", name)
	}
	t.Skipf("%s not installed; scripts/test.sh installs it", name)
	return ""
}
