package packages

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goreleaser/nfpm/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

func build(t *testing.T, format string, pkg func(Build) *nfpm.Info) (string, *nfpm.Info) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := Build{Repo: "../..", Binary: bin, Version: "v1.2.3", Arch: "amd64", MTime: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Format: format}
	in := pkg(b)
	var buf bytes.Buffer
	if err := Write(b, in, &buf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), in.Target)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, in
}

func dpkgDeb(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(testtool.Need(t, "dpkg-deb"), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("dpkg-deb %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestDebs: each .deb holds its binary, unit, environment file and
// configuration, with the configuration marked as conffiles (kept on
// upgrade), as dpkg itself reads the package.
// namedPath is an installed file's path in a comment or flag value.
var namedPath = regexp.MustCompile(`/(usr|etc)/[A-Za-z0-9_./-]+`)

func TestDebs(t *testing.T) {
	cases := []struct {
		pkg       func(Build) *nfpm.Info
		name      string
		files     []string
		conffiles []string
	}{
		{Exporter, "gpuwatch-exporter_1.2.3_amd64.deb",
			[]string{"./usr/bin/gpuwatch-exporter", "./usr/lib/systemd/system/gpuwatch-exporter.service", "./usr/lib/tmpfiles.d/gpuwatch-exporter.conf",
				"./usr/share/gpuwatch/slurm/prolog", "./usr/share/gpuwatch/slurm/epilog"},
			[]string{"/etc/default/gpuwatch-exporter", "/etc/gpuwatch/teams.yml"}},
		{Analyzer, "gpuwatch-analyzer_1.2.3_amd64.deb",
			[]string{"./usr/bin/gpuwatch-analyzer", "./usr/lib/systemd/system/gpuwatch-analyzer.service", "./usr/lib/sysusers.d/gpuwatch-analyzer.conf",
				"./usr/share/gpuwatch/gpuwatch-analyzer-reports.conf"},
			[]string{"/etc/default/gpuwatch-analyzer", "/etc/gpuwatch/analyzer.yml", "/etc/gpuwatch/policy.yml"}},
		{CLI, "gpuwatch_1.2.3_amd64.deb", []string{"./usr/bin/gpuwatch"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, _ := build(t, "deb", c.pkg)
			if filepath.Base(p) != c.name {
				t.Errorf("file name %s, want %s", filepath.Base(p), c.name)
			}
			contents := dpkgDeb(t, "--contents", p)
			for _, f := range append(c.files, c.conffiles...) {
				if !strings.Contains(contents, " ."+strings.TrimPrefix(f, ".")+"\n") {
					t.Errorf("%s is not in the package:\n%s", f, contents)
				}
			}
			// Every file the package's /etc/default file names under /usr or
			// /etc is one the package installs.
			def, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", strings.Split(c.name, "_")[0]+".default"))
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			for _, m := range namedPath.FindAllString(string(def), -1) {
				m = strings.TrimRight(m, ".,;:")
				if !strings.Contains(contents, " ."+m+"\n") {
					t.Errorf("/etc/default/%s names %s, which the package does not install", strings.Split(c.name, "_")[0], m)
				}
			}
			if strings.Contains(contents, "/usr/local/") {
				t.Error("a package must not install into /usr/local")
			}
			var conffiles []string
			if regexp.MustCompile(`(?m) conffiles\s*$`).MatchString(dpkgDeb(t, "--info", p)) {
				conffiles = strings.Fields(dpkgDeb(t, "--info", p, "conffiles"))
			}
			sort.Strings(conffiles)
			if strings.Join(conffiles, " ") != strings.Join(c.conffiles, " ") {
				t.Errorf("conffiles %v, want %v", conffiles, c.conffiles)
			}
			control := dpkgDeb(t, "--field", p, "Version", "Architecture", "Depends")
			for _, w := range []string{"Version: 1.2.3", "Architecture: amd64", "Depends: libc6"} {
				if !strings.Contains(control, w) {
					t.Errorf("control %q lacks %q", control, w)
				}
			}
		})
	}
}

// TestRPMs: the .rpm packages build, named for their architecture.
func TestRPMs(t *testing.T) {
	for _, pkg := range []func(Build) *nfpm.Info{Exporter, Analyzer, CLI} {
		p, in := build(t, "rpm", pkg)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte{0xed, 0xab, 0xee, 0xdb}) || !strings.HasSuffix(p, ".x86_64.rpm") {
			t.Errorf("%s (%s) is not an x86_64 rpm", p, in.Name)
		}
	}
}

// TestShippedConfigWorks: what the packages put in /etc is accepted by
// gpuwatch's own parsers, and the policy starts in dry-run.
func TestShippedConfigWorks(t *testing.T) {
	data, err := os.ReadFile("../../deploy/packaging/teams.yml")
	if err != nil {
		t.Fatal(err)
	}
	if tm, err := teams.Parse(data); err != nil {
		t.Errorf("teams.yml: %v", err)
	} else if len(tm.Warnings) > 0 {
		t.Errorf("teams.yml uses deprecated keys: %v", tm.Warnings)
	}
	data, err = os.ReadFile("../../deploy/examples/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse(data)
	if err != nil || !pol.DryRun {
		t.Errorf("policy.yml: dry-run %v, error %v", pol != nil && pol.DryRun, err)
	}
}
