package testtool

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostUnitDir is where this machine's systemd keeps its own units (Debian
// merges /lib into /usr/lib).
const hostUnitDir = "/usr/lib/systemd/system"

// SystemdRoot returns a fresh folder to install units into, as the root of a
// file system, for VerifyUnits: it holds a copy of this machine's own units
// (the targets a unit is ordered after or wanted by), so verify judges the
// installed units and what they name, not a missing sysinit.target.
func SystemdRoot(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(hostUnitDir); err != nil {
		Missing(t, "no "+hostUnitDir+" on this machine; scripts/test.sh installs systemd")
	}
	root := t.TempDir()
	dst := filepath.Join(root, hostUnitDir)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	// cp keeps the symlinks (aliases) as they are.
	if out, err := exec.Command("cp", "-a", hostUnitDir+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", hostUnitDir, err, out)
	}
	return root
}

// VerifyUnits runs `systemd-analyze verify --root=root` on the named units
// as installed under root: the units and their drop-ins are read from root,
// and ExecStart's binary is looked up there, so a unit that runs a binary the
// install did not put there fails, as it would on the machine. Any message
// about a unit under test fails the test. A missing systemd-analyze is a
// failure with CI set, else a skip.
func VerifyUnits(t testing.TB, root string, units ...string) {
	t.Helper()
	sa := Need(t, "systemd-analyze")
	out, err := exec.Command(sa, append([]string{"verify", "--root=" + root}, units...)...).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze verify --root=%s %s: %v\n%s", root, strings.Join(units, " "), err, out)
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		for _, u := range units {
			if strings.Contains(line, filepath.Base(u)) {
				t.Errorf("systemd-analyze verify: %s", line)
			}
		}
	}
}
