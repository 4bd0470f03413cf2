package procfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// FakeProcess describes a process for WriteFixture.
type FakeProcess struct {
	PID     int
	Comm    string
	UID     int
	Start   uint64
	Cgroup  string   // content of /proc/<pid>/cgroup
	Environ []string // KEY=value entries of /proc/<pid>/environ
}

// WriteFixture writes a minimal proc tree (stat, comm, status, cgroup) for
// tests and benchmarks of this and other packages.
func WriteFixture(root string, procs ...FakeProcess) error {
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.PID))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		files := map[string]string{
			"stat": fmt.Sprintf("%d (%s) S 1 %d %d 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 %d 1000000 100 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
				p.PID, p.Comm, p.PID, p.PID, p.Start),
			"comm":    p.Comm + "\n",
			"status":  fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nUid:\t%d\t%d\t%d\t%d\nGid:\t100\t100\t100\t100\n", p.Comm, p.PID, p.PID, p.UID, p.UID, p.UID, p.UID),
			"cgroup":  p.Cgroup,
			"environ": strings.Join(p.Environ, "\x00") + "\x00",
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}
