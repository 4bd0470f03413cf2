package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// The node agent stays lean: no Kubernetes client (the kubelet's
// pod-resources API is plain gRPC) and nothing of Prometheus itself.
func TestLeanDependencies(t *testing.T) {
	deps := testtool.Deps(t, ".")
	if bad := testtool.Forbidden(deps, "k8s.io/client-go", "github.com/prometheus/prometheus/",
		"github.com/gpuwatch/gpuwatch/analyzer/"); len(bad) > 0 {
		t.Errorf("gpuwatch-exporter depends on %d packages it must not: %s", len(bad), strings.Join(bad, " "))
	}
	t.Logf("gpuwatch-exporter builds from %d packages", len(deps))
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want int
		msgs []string
	}{
		{"unknown flag", []string{"--no-such-flag"}, 2, []string{"no-such-flag"}},
		{"bad duration", []string{"--collect-interval=soon"}, 2, []string{"collect-interval"}},
		{"no driver", []string{"--source=auto", "--web.listen-address=127.0.0.1:0"}, 2, []string{"libnvidia-ml.so.1"}},
		{"help", []string{"--help"}, 0, []string{"--collect-interval", "--log.level"}},
		{"version", []string{"--version"}, 0, []string{"gpuwatch-exporter, version"}},
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
