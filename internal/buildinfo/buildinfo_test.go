package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/version"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestFill(t *testing.T) {
	saved := []string{version.Version, version.Revision, version.BuildDate}
	t.Cleanup(func() { version.Version, version.Revision, version.BuildDate = saved[0], saved[1], saved[2] })
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.time", Value: "2026-11-30T12:00:00Z"}}
	for _, tc := range []struct {
		name      string
		ldflags   string // version set with -X
		bi        *debug.BuildInfo
		want      string
		wantBuilt string
	}{
		{"checkout build", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "dev", "2026-11-30T12:00:00Z"},
		{"go install of a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0", ""},
		{"release with -X", "1.5.0", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "1.5.0", "2026-11-30T12:00:00Z"},
		{"no build info", "", nil, "dev", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			version.Version, version.Revision, version.BuildDate = tc.ldflags, "", ""
			fill(tc.bi)
			if version.Version != tc.want || version.BuildDate != tc.wantBuilt {
				t.Errorf("version %q, date %q; want %q, %q", version.Version, version.BuildDate, tc.want, tc.wantBuilt)
			}
			if version.Revision == "" {
				t.Error("revision left empty")
			}
		})
	}
}

func TestCollector(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(Collector())
	if n, err := testutil.GatherAndCount(reg, schema.BuildInfo.Name); err != nil || n != 1 {
		t.Fatalf("%s: %d series, %v", schema.BuildInfo.Name, n, err)
	}
	if lint, err := testutil.GatherAndLint(reg); err != nil || len(lint) > 0 {
		t.Errorf("lint: %v %v", lint, err)
	}
}

// Every binary built in a checkout says which commit it is: go build stamps
// the revision (scripts/test.sh and testtool.Binary ask for the stamp, which
// a machine's GOFLAGS may turn off) and --version prints it. This is what a
// release build does too.
func TestVersionPrintsCommit(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		testtool.Missing(t, "not a git checkout: "+err.Error())
	}
	rev := strings.TrimSpace(string(head))
	if fi, err := os.Stat(filepath.Join(root, ".git")); err != nil || !fi.IsDir() {
		// go build finds a repository by its .git folder; in a linked
		// worktree .git is a file, and the build carries no VCS stamp.
		testtool.Missing(t, "not a git clone (a linked worktree?): go build stamps no revision here")
	}
	// The commands as the suite built them (GPUWATCH_BIN_DIR), or built
	// here: go build stamps the revision of the clone either way.
	for _, bin := range []string{"gpuwatch", "gpuwatch-analyzer", "gpuwatch-exporter"} {
		out, err := exec.Command(testtool.Binary(t, "cmd/"+bin), "--version").CombinedOutput()
		if err != nil {
			t.Errorf("%s --version: %v\n%s", bin, err, out)
			continue
		}
		if !strings.HasPrefix(string(out), bin+", version ") || !strings.Contains(string(out), "revision: "+rev) || strings.Contains(string(out), "usage:") {
			t.Errorf("%s --version does not name commit %s:\n%s", bin, rev, out)
		}
	}
}
