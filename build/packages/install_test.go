package packages

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/goreleaser/nfpm/v2"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// installDeb unpacks a .deb into root as dpkg would lay out its files (no
// maintainer scripts).
func installDeb(t *testing.T, deb, root string) {
	t.Helper()
	dpkgDeb(t, "-x", deb, root)
}

// TestPackagedUnitsVerify installs each package's files into one root and
// runs systemd-analyze verify on the units there: a unit whose ExecStart
// names a binary no package installs (or a misspelt key) fails here.
func TestPackagedUnitsVerify(t *testing.T) {
	root := testtool.SystemdRoot(t)
	for _, pkg := range []func(Build) *nfpm.Info{Exporter, Analyzer, CLI} {
		p, _ := build(t, "deb", pkg)
		installDeb(t, p, root)
	}
	// The reports drop-in, where the packages' comments say to put it.
	dropIn, err := os.ReadFile(filepath.Join(root, "usr/share/gpuwatch/gpuwatch-analyzer-reports.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "etc/systemd/system/gpuwatch-analyzer.service.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "reports.conf"), dropIn, 0o644); err != nil {
		t.Fatal(err)
	}
	testtool.VerifyUnits(t, root, "gpuwatch-exporter.service", "gpuwatch-analyzer.service")

	// The check itself: a unit whose binary is not installed fails verify.
	if err := os.Remove(filepath.Join(root, "usr/bin/gpuwatch-analyzer")); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testtool.Need(t, "systemd-analyze"), "verify", "--root="+root, "gpuwatch-analyzer.service").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "/usr/bin/gpuwatch-analyzer") {
		t.Errorf("verify passed a unit whose binary is missing: %v\n%s", err, out)
	}
}

// summaryBin is the program deploy/slurm/job-summary runs unless
// GPUWATCH_BIN says otherwise.
var summaryBin = regexp.MustCompile(`(?m)^bin=\$\{GPUWATCH_BIN:-([^}]+)\}$`)

// TestJobSummaryBinaryIsPackaged: the program the exporter package's
// job-summary runs is a file the gpuwatch package installs on its PATH, and
// the exporter package recommends that package.
func TestJobSummaryBinaryIsPackaged(t *testing.T) {
	script, err := os.ReadFile("../../deploy/slurm/job-summary")
	if err != nil {
		t.Fatal(err)
	}
	m := summaryBin.FindSubmatch(script)
	if m == nil {
		t.Fatal("job-summary sets no default bin=${GPUWATCH_BIN:-...}")
	}
	if string(m[1]) != JobSummaryBinary {
		t.Errorf("job-summary runs %s, the package installs %s", m[1], JobSummaryBinary)
	}
	p, _ := build(t, "deb", CLI)
	if contents := dpkgDeb(t, "--contents", p); !strings.Contains(contents, " ./usr/bin/"+string(m[1])+"\n") {
		t.Errorf("the %s package does not install /usr/bin/%s:\n%s", CLIPackage, m[1], contents)
	}
	p, _ = build(t, "deb", Exporter)
	if got := dpkgDeb(t, "--field", p, "Recommends"); strings.TrimSpace(got) != CLIPackage {
		t.Errorf("gpuwatch-exporter Recommends %q, want %s", got, CLIPackage)
	}
	if got := dpkgDeb(t, "--field", p, "Description"); !strings.Contains(got, "needs the "+CLIPackage+" package") {
		t.Errorf("gpuwatch-exporter's description does not say the summary needs %s:\n%s", CLIPackage, got)
	}
}

// runJobSummary runs deploy/slurm/job-summary with env added to a clean
// environment (no /etc/default/gpuwatch-slurm is read once the URL is set).
func runJobSummary(t *testing.T, env ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("sh", "../../deploy/slurm/job-summary")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "SLURM_JOB_ID=4242", "GPUWATCH_SUMMARY_TIMEOUT=8"}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// TestJobSummaryWithoutTheJobCommand: a node with summaries configured but no
// gpuwatch binary logs an error that names the package to install and exits
// 1 (the epilog ignores the status); before, it said "not found" and exited 0.
func TestJobSummaryWithoutTheJobCommand(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gpuwatch")
	out, code := runJobSummary(t, "GPUWATCH_PROMETHEUS_URL=http://127.0.0.1:1", "GPUWATCH_BIN="+missing)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"error: job 4242", missing + " not found", "gpuwatch package"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
		t.Errorf("want one line, got %d:\n%s", n+1, out)
	}
	// Not configured: nothing to do, nothing said.
	if out, code := runJobSummary(t, "GPUWATCH_BIN="+missing); code != 0 || out != "" {
		t.Errorf("without GPUWATCH_PROMETHEUS_URL: exit %d, %q", code, out)
	}
}

// TestJobSummaryRunsThePackagedBinary runs job-summary with the real gpuwatch
// (what the gpuwatch package installs): the command line it builds parses,
// gpuwatch makes the summary (a note, with Prometheus down) and tries to write
// it into the job's AdminComment; that write fails here (no Slurm
// configuration in the clean environment), which job-summary reports as an
// error in one line.
func TestJobSummaryRunsThePackagedBinary(t *testing.T) {
	bin := testtool.Binary(t, "cmd/"+JobSummaryBinary)
	out, code := runJobSummary(t, "GPUWATCH_PROMETHEUS_URL=http://127.0.0.1:1", "GPUWATCH_BIN="+bin)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	for _, want := range []string{"error: job 4242: no summary: gpuwatch job:", "JobId=4242 AdminComment=gpuwatch1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
		t.Errorf("want one line, got %d:\n%s", n+1, out)
	}
}
