package main

import (
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// maxDeps bounds the packages the first `go build ./cmd/gpuwatch` compiles
// (1,149 when it was set): a new dependency that brings a package tree in
// fails here, where it is cheap to reconsider. About 165 of them are the
// AWS, Azure and Google SDKs, which the embedded TSDB brings in through
// prometheus/config (its DB.ApplyConfig); the binary never calls them.
const maxDeps = 1200

// TestLeanDependencies: gpuwatch links the TSDB and PromQL for its embedded
// store, and no other part of Prometheus' server; of client-go only the
// typed clients it calls, not the full clientset, informers or leader
// election.
func TestLeanDependencies(t *testing.T) {
	deps := testtool.Deps(t, ".")
	if bad := testtool.Forbidden(deps,
		"github.com/prometheus/prometheus/scrape", "github.com/prometheus/prometheus/rules",
		"github.com/prometheus/prometheus/web", "github.com/prometheus/prometheus/notifier",
		"github.com/prometheus/prometheus/discovery/kubernetes", "github.com/prometheus/prometheus/discovery/aws",
		"k8s.io/client-go/informers", "k8s.io/client-go/listers", "k8s.io/client-go/tools/leaderelection"); len(bad) > 0 {
		t.Errorf("gpuwatch depends on %d packages it must not: %s", len(bad), strings.Join(bad, " "))
	}
	// Exact names: the config package needs two packages under
	// storage/remote (the Azure and Google auth of remote write).
	for _, d := range deps {
		switch d {
		case "k8s.io/client-go/kubernetes", "github.com/prometheus/prometheus/storage/remote":
			t.Errorf("gpuwatch depends on %s, which it never calls", d)
		}
	}
	if len(deps) > maxDeps {
		t.Errorf("gpuwatch builds from %d packages, bound %d", len(deps), maxDeps)
	}
	t.Logf("gpuwatch builds from %d packages (bound %d)", len(deps), maxDeps)
}
