package manifests

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// exporterBinary builds cmd/gpuwatch-exporter once per test run. The flags
// are checked by the real binary rather than in this process: kustomize's
// library links Go's plugin package, which makes the linker bind every
// symbol at start, and go-nvml's symbols (resolved only when a driver is
// loaded) would then stop the test binary from starting.
func exporterBinary(t testing.TB) string { return testtool.Binary(t, "cmd/gpuwatch-exporter") }

// parseExporterArgs parses args with gpuwatch-exporter's own flag parser (the
// lean exporter the images and packages run), so a renamed or misspelt flag
// in a manifest fails here, not on the fleet. --help ends the program after
// parsing, before anything starts.
func parseExporterArgs(t *testing.T, args []string) {
	t.Helper()
	if err := exporterArgsError(t, args); err != nil {
		t.Error(err)
	}
}

func exporterArgsError(t testing.TB, args []string) error {
	bin := exporterBinary(t)
	cmd := exec.Command(bin, append(append([]string{}, args...), "--help")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gpuwatch-exporter %q: %v\n%s", args, err, stderr.String())
	}
	return nil
}

// TestExporterArgsCheckFails: the check catches a misspelt flag.
func TestExporterArgsCheckFails(t *testing.T) {
	if err := exporterArgsError(t, []string{"--collect-intervall=1s"}); err == nil || !strings.Contains(err.Error(), "collect-intervall") {
		t.Fatalf("error %v, want one naming --collect-intervall", err)
	}
}

// envArgs reads NAME="..." from a systemd environment file.
func envArgs(t *testing.T, file, name string) []string {
	t.Helper()
	env, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `="([^"]*)"`).FindSubmatch(env)
	if m == nil {
		t.Fatalf("%s sets no %s", file, name)
	}
	return strings.Fields(string(m[1]))
}

func TestUnitEnvironmentArgsParse(t *testing.T) {
	parseExporterArgs(t, envArgs(t, "../systemd/gpuwatch-exporter.default", "GPUWATCH_EXPORTER_ARGS"))
	checkAnalyzerArgs(t, "gpuwatch-analyzer.default", envArgs(t, "../systemd/gpuwatch-analyzer.default", "GPUWATCH_ANALYZER_ARGS"), analyzerFlags(t))
}

// analyzerFlags reads the flag names the analyzer daemon registers from its
// source (cmd/internal/analyzercmd, shared by gpuwatch and gpuwatch-analyzer:
// analyzer.go and storage.go), plus exporter-toolkit's web flags.
func analyzerFlags(t *testing.T) map[string]bool {
	t.Helper()
	var src []byte
	// The daemon's own flags, and the storage flags it shares with audit
	// and report.
	for _, f := range []string{"analyzer.go", "storage.go"} {
		b, err := os.ReadFile("../../cmd/internal/analyzercmd/" + f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	flags := map[string]bool{"web.listen-address": true, "web.config.file": true, "web.systemd-socket": true}
	for _, m := range regexp.MustCompile(`\.Flag\("([a-z0-9.-]+)"`).FindAllSubmatch(src, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 6 || !flags["policy.file"] {
		t.Fatalf("could not read the analyzer's flags from cmd/internal/analyzercmd/analyzer.go (got %v)", flags)
	}
	return flags
}

// checkAnalyzerArgs: every argument is a flag of the analyzer (the image's
// entrypoint and the unit name the subcommand), and the policy is given.
func checkAnalyzerArgs(t *testing.T, where string, args []string, known map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: argument %q is not a flag", where, a)
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		seen[name] = true
		if !known[name] {
			t.Errorf("%s: --%s is not a flag of gpuwatch analyzer", where, name)
		}
	}
	if !seen["policy.file"] {
		t.Errorf("%s: --policy.file is required", where)
	}
}
