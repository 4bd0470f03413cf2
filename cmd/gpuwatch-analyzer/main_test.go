package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// The analyzer daemon reads telemetry from Prometheus: it is built without
// the embedded TSDB, which pulls in the cloud SDKs of Prometheus' service
// discovery and remote storage.
func TestLeanDependencies(t *testing.T) {
	deps := testtool.Deps(t, ".")
	// The TSDB's chunk encoding is a leaf: the remote read of recorded
	// figures decodes the chunks Prometheus streams.
	kept := slices.DeleteFunc(slices.Clone(deps), func(d string) bool { return d == "github.com/prometheus/prometheus/tsdb/chunkenc" })
	if bad := testtool.Forbidden(kept, "github.com/prometheus/prometheus/tsdb", "github.com/prometheus/prometheus/promql",
		"github.com/aws/", "github.com/Azure/", "cloud.google.com/", "google.golang.org/api/",
		"github.com/gpuwatch/gpuwatch/analyzer/query/embedded", "github.com/gpuwatch/gpuwatch/exporter/sim",
		// client-go's informers and full clientset come with tools/leaderelection.
		"k8s.io/client-go/informers", "k8s.io/client-go/listers", "k8s.io/client-go/tools/leaderelection"); len(bad) > 0 {
		t.Errorf("gpuwatch-analyzer depends on %d packages it must not: %s", len(bad), strings.Join(bad, " "))
	}
	t.Logf("gpuwatch-analyzer builds from %d packages", len(deps))
}

func TestCommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
		msgs []string
	}{
		{"help lists the subcommands", []string{"--help"}, 0, []string{"analyzer", "analyze", "report", "audit", "check-config"}},
		{"no embedded store", []string{"analyze", "--tsdb.path=/tmp"}, 2, []string{"--tsdb.path", "no embedded telemetry store", "--prometheus.url"}},
		{"--storage.path is the state database", []string{"analyze", "--storage.path=/tmp"}, 2, []string{"--storage.path names the state database", "--prometheus.url"}},
		{"analyze needs prometheus", []string{"analyze"}, 2, []string{"--prometheus.url is required"}},
		{"no demo", []string{"demo"}, 2, []string{"demo"}},
		{"check-config", []string{"check-config", "--policy=../../deploy/examples/policy.yaml"}, 0, nil},
		{"version", []string{"--version"}, 0, []string{"gpuwatch-analyzer, version"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(tc.args, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
			for _, m := range tc.msgs {
				if !strings.Contains(stderr.String(), m) {
					t.Errorf("stderr lacks %q: %s", m, stderr.String())
				}
			}
		})
	}
}

// TestCLIDocCurrent keeps docs/cli-analyzer.md in step with the flags.
func TestCLIDocCurrent(t *testing.T) {
	var b bytes.Buffer
	newApp(&bytes.Buffer{}).WriteDoc(&b)
	const path = "../../docs/cli-analyzer.md"
	got, _ := os.ReadFile(path)
	if string(got) == b.String() {
		return
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date; run UPDATE_DOCS=1 go test ./cmd/gpuwatch-analyzer", path)
}
