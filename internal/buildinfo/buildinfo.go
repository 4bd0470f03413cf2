// Package buildinfo says which build is running: it fills the variables of
// github.com/prometheus/common/version (what --version prints and
// gpuwatch_build_info carries) from the VCS stamp and module version that Go
// embeds in every binary built in a checkout. A release build may still set
// them with -ldflags "-X github.com/prometheus/common/version.Version=..."; a
// value set that way wins.
package buildinfo

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"

	"github.com/gpuwatch/gpuwatch/schema"
)

// devel is the version of a build that carries no module version: one
// without VCS stamping (-buildvcs=false, or a linked git worktree). A stamped
// build in a clone has a pseudo-version such as v0.0.0-20261130123801-9a310354f1b7.
const devel = "dev"

func init() {
	bi, _ := debug.ReadBuildInfo()
	fill(bi)
}

// fill sets what -ldflags left empty from bi (nil when the binary has none).
func fill(bi *debug.BuildInfo) {
	if version.Version == "" {
		version.Version = devel
		if bi != nil && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version.Version = bi.Main.Version
		}
	}
	if version.Revision == "" {
		// GetRevision reads vcs.revision (with -modified for a dirty tree),
		// or "unknown" when built with -buildvcs=false.
		version.Revision = version.GetRevision()
	}
	if version.BuildDate == "" && bi != nil {
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" { // the commit's time: the best date a plain go build has
				version.BuildDate = s.Value
			}
		}
	}
}

// Version is the running build's version: a module version, or "dev".
func Version() string { return version.Version }

// Print is the --version text of program: version, revision, branch, build
// user and date, Go version and platform.
func Print(program string) string { return version.Print(program) }

// Collector publishes gpuwatch_build_info: constant 1, labelled with the
// version, revision, branch and Go toolchain of the running build.
func Collector() prometheus.Collector {
	g := schema.BuildInfo.GaugeVec()
	g.WithLabelValues(version.Version, version.Revision, version.Branch, version.GoVersion, version.GoOS, version.GoArch).Set(1)
	return g
}
