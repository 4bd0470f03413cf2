package manifests

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/gpuwatch/gpuwatch/exporter/attribution"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

// parseExporterArgs parses args with the exporter's real flag set, so a
// renamed or misspelt flag in a manifest fails here, not on the fleet.
func parseExporterArgs(t *testing.T, args []string) {
	t.Helper()
	app := kingpin.New("gpuwatch", "")
	app.Terminate(nil)
	cmd := app.Command("exporter", "")
	cli.Register(cmd)
	if cmd.GetFlag("hpc-job-mapping-dir") == nil { // attribution not (yet) part of cli.Register
		attribution.RegisterFlags(cmd)
	}
	if _, err := app.Parse(args); err != nil {
		t.Errorf("exporter args %q: %v", args, err)
	}
}

func TestExporterArgsParse(t *testing.T) {
	for _, dir := range append([]string{"base"}, overlays...) {
		ds := find(t, renderDir(t, dir), "DaemonSet", "gpuwatch-exporter").Typed.(*appsv1.DaemonSet)
		parseExporterArgs(t, ds.Spec.Template.Spec.Containers[0].Args)
	}
	env, err := os.ReadFile("../systemd/gpuwatch.env.example")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GPUWATCH_EXPORTER_ARGS="([^"]*)"`).FindSubmatch(env)
	if m == nil {
		t.Fatal("gpuwatch.env.example sets no GPUWATCH_EXPORTER_ARGS")
	}
	parseExporterArgs(t, append([]string{"exporter"}, strings.Fields(string(m[1]))...))
}

// analyzerFlags reads the flag names `gpuwatch analyzer` registers from its
// source (cmd/gpuwatch is a main package, so it cannot be imported), plus
// exporter-toolkit's web flags.
func analyzerFlags(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile("../../cmd/gpuwatch/cmd_analyzer.go")
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{"web.listen-address": true, "web.config.file": true, "web.systemd-socket": true}
	for _, m := range regexp.MustCompile(`\.Flag\("([a-z0-9.-]+)"`).FindAllSubmatch(src, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 6 || !flags["policy.file"] {
		t.Fatalf("could not read the analyzer's flags from cmd_analyzer.go (got %v)", flags)
	}
	return flags
}

func checkAnalyzerArgs(t *testing.T, where string, args []string, known map[string]bool) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
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

func TestAnalyzerArgsAreKnownFlags(t *testing.T) {
	known := analyzerFlags(t)
	for _, dir := range append([]string{"base"}, overlays...) {
		dep := find(t, renderDir(t, dir), "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
		args := dep.Spec.Template.Spec.Containers[0].Args
		if len(args) == 0 || args[0] != "analyzer" {
			t.Errorf("%s: analyzer args %v must start with the analyzer subcommand", dir, args)
		}
		checkAnalyzerArgs(t, dir, args, known)
	}
	env, err := os.ReadFile("../systemd/gpuwatch.env.example")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GPUWATCH_ANALYZER_ARGS="([^"]*)"`).FindSubmatch(env)
	if m == nil {
		t.Fatal("gpuwatch.env.example sets no GPUWATCH_ANALYZER_ARGS")
	}
	checkAnalyzerArgs(t, "gpuwatch.env.example", strings.Fields(string(m[1])), known)
}
