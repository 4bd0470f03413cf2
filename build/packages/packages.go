// Package packages builds gpuwatch's .deb and .rpm packages for bare-metal
// and Slurm nodes with nFPM: the binary, its systemd unit, its environment
// file and configuration in /etc (kept on upgrade), and what makes the unit
// start out of the box (the job-mapping folder, a teams file, the analyzer's
// system user). Three packages, one binary each: gpuwatch-exporter (every GPU
// node), gpuwatch-analyzer (one service node) and gpuwatch (the full command
// line, whose `job` command the Slurm end-of-job summary runs).
package packages

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Formats are the package formats built.
var Formats = []string{"deb", "rpm"}

// Build describes one package build.
type Build struct {
	// Repo is the repository's root, where the units and examples are.
	Repo string
	// Binary is the program to package.
	Binary  string
	Version string
	// Arch is Go's name (amd64, arm64); nFPM maps it per format.
	Arch   string
	MTime  time.Time
	Format string
}

func (b Build) src(p string) string { return filepath.Join(b.Repo, p) }

func file(src, dst string, mode uint32) *files.Content {
	return &files.Content{Source: src, Destination: dst, FileInfo: &files.ContentFileInfo{Mode: os.FileMode(mode)}}
}

// conf is a configuration file: never overwritten on upgrade once edited.
func conf(src, dst string, mode uint32) *files.Content {
	c := file(src, dst, mode)
	c.Type = files.TypeConfigNoReplace
	return c
}

// CLIPackage is the name of the package that installs the full gpuwatch
// command (CLI); JobSummaryBinary is the program deploy/slurm/job-summary runs
// by default, which that package installs in /usr/bin.
const (
	CLIPackage       = "gpuwatch"
	JobSummaryBinary = "gpuwatch"
)

// Exporter is the gpuwatch-exporter package. Its Slurm epilog's end-of-job
// summary runs `gpuwatch job`, which the lean exporter does not have: the
// package recommends the gpuwatch package (apt and dnf install recommended
// packages by default) and says so when it is missing.
func Exporter(b Build) *nfpm.Info {
	in := info(b, "gpuwatch-exporter",
		"GPU telemetry exporter (dcgm-exporter metric names) with job attribution",
		"Per-GPU telemetry for Prometheus under dcgm-exporter's metric names, through NVML\n"+
			"(libnvidia-ml.so.1 from the NVIDIA driver), with the Slurm job or Kubernetes pod\n"+
			"holding each GPU. Includes the systemd unit and the Slurm prolog and epilog;\n"+
			"the epilog's end-of-job summary needs the "+CLIPackage+" package (its job command).",
		files.Contents{
			file(b.Binary, "/usr/bin/gpuwatch-exporter", 0o755),
			file(b.src("deploy/systemd/gpuwatch-exporter.service"), "/usr/lib/systemd/system/gpuwatch-exporter.service", 0o644),
			conf(b.src("deploy/systemd/gpuwatch-exporter.default"), "/etc/default/gpuwatch-exporter", 0o644),
			conf(b.src("deploy/packaging/teams.yml"), "/etc/gpuwatch/teams.yml", 0o644),
			file(b.src("deploy/packaging/gpuwatch-exporter.tmpfiles"), "/usr/lib/tmpfiles.d/gpuwatch-exporter.conf", 0o644),
			file(b.src("deploy/slurm/prolog"), "/usr/share/gpuwatch/slurm/prolog", 0o755),
			file(b.src("deploy/slurm/epilog"), "/usr/share/gpuwatch/slurm/epilog", 0o755),
			file(b.src("deploy/slurm/job-summary"), "/usr/libexec/gpuwatch/job-summary", 0o755),
			file(b.src("deploy/slurm/README.md"), "/usr/share/doc/gpuwatch-exporter/slurm.md", 0o644),
		},
		nfpm.Scripts{PostInstall: b.src("deploy/packaging/exporter-postinstall.sh"), PreRemove: b.src("deploy/packaging/exporter-preremove.sh")})
	in.Recommends = []string{CLIPackage}
	return in
}

// CLI is the gpuwatch package: the full command line (job, plan, analyze,
// report, audit, agent, demo, dashboards), for operators' machines and for the
// GPU nodes whose Slurm epilog writes the end-of-job summary. No unit: the
// daemons are the other two packages'.
func CLI(b Build) *nfpm.Info {
	return info(b, CLIPackage,
		"GPU waste command line: job view, planner, one-shot analysis, demo",
		"Every gpuwatch subcommand in one binary: gpuwatch job (one job's GPU use, and the\n"+
			"Slurm end-of-job summary that gpuwatch-exporter's epilog writes), plan, analyze,\n"+
			"report, audit, the single-node agent and the demo.",
		files.Contents{
			file(b.Binary, "/usr/bin/"+JobSummaryBinary, 0o755),
		},
		nfpm.Scripts{})
}

// Analyzer is the gpuwatch-analyzer package: dry-run policy, no SMTP needed
// until the reports' drop-in is installed.
func Analyzer(b Build) *nfpm.Info {
	return info(b, "gpuwatch-analyzer",
		"GPU waste analyzer, dry-run reclamation policy and weekly reports",
		"Classifies GPU waste per job from Prometheus data, escalates under a policy that\n"+
			"starts in dry-run (every step audited), serves a web page and sends weekly\n"+
			"reports by email once configured.",
		files.Contents{
			file(b.Binary, "/usr/bin/gpuwatch-analyzer", 0o755),
			file(b.src("deploy/systemd/gpuwatch-analyzer.service"), "/usr/lib/systemd/system/gpuwatch-analyzer.service", 0o644),
			conf(b.src("deploy/systemd/gpuwatch-analyzer.default"), "/etc/default/gpuwatch-analyzer", 0o644),
			conf(b.src("deploy/examples/policy.yaml"), "/etc/gpuwatch/policy.yml", 0o644),
			conf(b.src("analyzer/config/example.yaml"), "/etc/gpuwatch/analyzer.yml", 0o644),
			file(b.src("deploy/packaging/gpuwatch-analyzer.sysusers"), "/usr/lib/sysusers.d/gpuwatch-analyzer.conf", 0o644),
			file(b.src("deploy/systemd/gpuwatch-analyzer-reports.conf"), "/usr/share/gpuwatch/gpuwatch-analyzer-reports.conf", 0o644),
		},
		nfpm.Scripts{PostInstall: b.src("deploy/packaging/analyzer-postinstall.sh"), PreRemove: b.src("deploy/packaging/analyzer-preremove.sh")})
}

func info(b Build, name, summary, description string, contents files.Contents, scripts nfpm.Scripts) *nfpm.Info {
	in := &nfpm.Info{
		Name:        name,
		Arch:        b.Arch,
		Platform:    "linux",
		Version:     b.Version,
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "gpuwatch <gpuwatch@example.org>",
		Description: summary + "\n" + description,
		Vendor:      "gpuwatch",
		Homepage:    "https://github.com/gpuwatch/gpuwatch",
		License:     "Apache-2.0",
		MTime:       b.MTime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  scripts,
			// glibc: the binaries are built with cgo (go-nvml).
			Depends: []string{"libc6"},
			RPM:     nfpm.RPM{},
		},
	}
	if b.Format == "rpm" {
		in.Depends = []string{"glibc"}
		in.RPM.Summary = summary
		in.RPM.Group = "System Environment/Daemons"
	}
	return nfpm.WithDefaults(in)
}

// Write builds the package described by in, in b.Format, into w.
func Write(b Build, in *nfpm.Info, w io.Writer) error {
	if err := nfpm.PrepareForPackager(in, b.Format); err != nil {
		return fmt.Errorf("%s %s: %w", in.Name, b.Format, err)
	}
	p, err := nfpm.Get(b.Format)
	if err != nil {
		return err
	}
	in.Target = p.ConventionalFileName(in)
	if err := p.Package(in, w); err != nil {
		return fmt.Errorf("%s %s: %w", in.Name, b.Format, err)
	}
	return nil
}
