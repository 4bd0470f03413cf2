package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// These tests hold the install paths of install.md and quickstart.md to what
// the repository builds and what its units run: the documented commands are
// run (into a private root) or checked against ./cmd, not read by a person.

var (
	shBlockRE  = regexp.MustCompile("(?s)```sh\n(.*?)```")
	goBuildRE  = regexp.MustCompile(`^go build -o (\S+) \./(cmd/\S+)$`)
	goInstRE   = regexp.MustCompile(`go install github\.com/gpuwatch/gpuwatch`)
	pathArgRE  = regexp.MustCompile(`=(/(?:usr|etc)/[A-Za-z0-9_./-]+)`)
	summaryRE  = regexp.MustCompile(`GPUWATCH_JOB_SUMMARY:-([^}]+)\}`)
	summaryBin = regexp.MustCompile(`(?m)^bin=\$\{GPUWATCH_BIN:-([^}]+)\}$`)
)

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section is the text of a document from the heading to the next heading of
// the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	i := strings.Index(doc, heading+"\n")
	if i < 0 {
		t.Fatalf("no heading %q", heading)
	}
	level := heading[:strings.Index(heading, " ")+1]
	rest := doc[i+len(heading):]
	for _, h := range []string{"\n" + level, "\n" + strings.TrimSuffix(level, "# ") + " "} {
		if j := strings.Index(rest, h); j >= 0 {
			rest = rest[:j]
		}
	}
	return rest
}

// marked is the fenced block right after an HTML comment marker.
func marked(t *testing.T, doc, marker string) string {
	t.Helper()
	re := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(marker) + " -->\n\\s*```[a-z]*\n(.*?)\\s*```")
	m := re.FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("no block marked <!-- %s -->", marker)
	}
	return m[1]
}

// commands are the shell command lines of a text's sh blocks, comments cut.
func commands(text string) []string {
	var out []string
	for _, b := range shBlockRE.FindAllStringSubmatch(text, -1) {
		for _, line := range strings.Split(b[1], "\n") {
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out
}

// mainPackages are the commands the repository builds: the folders under
// cmd/ that hold package main.
func mainPackages(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir("../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("../cmd", e.Name(), "main.go")); err == nil && strings.Contains(string(b), "\npackage main\n") {
			out = append(out, "cmd/"+e.Name())
		}
	}
	return out
}

// builds maps each binary a text's `go build -o NAME ./cmd/X` lines make to
// its package, checking each names a real command and is named after it.
func builds(t *testing.T, where, text string) map[string]string {
	t.Helper()
	mains := strings.Join(mainPackages(t), " ")
	out := map[string]string{}
	for _, c := range commands(text) {
		m := goBuildRE.FindStringSubmatch(c)
		if m == nil {
			continue
		}
		if !strings.Contains(" "+mains+" ", " "+m[2]+" ") {
			t.Errorf("%s: %q builds %s, which is not a command of the repository (%s)", where, c, m[2], mains)
		}
		if m[1] != filepath.Base(m[2]) {
			t.Errorf("%s: %q names the binary %s after something else than its command", where, c, m[1])
		}
		out[m[1]] = m[2]
	}
	return out
}

// TestBuildFromClone: install.md's build-from-clone block builds every
// command of the repository and runs one, and no document tells users to
// `go install` the module, which is not published.
func TestBuildFromClone(t *testing.T) {
	block := "```sh\n" + marked(t, readDoc(t, "install.md"), "build-from-clone") + "\n```"
	built := builds(t, "install.md", block)
	for _, pkg := range mainPackages(t) {
		if built[filepath.Base(pkg)] != pkg {
			t.Errorf("install.md's build-from-clone block does not build ./%s", pkg)
		}
	}
	for _, c := range commands(block) {
		if name, args, ok := strings.Cut(c, " "); ok && strings.HasPrefix(name, "./") {
			pkg, ok := built[strings.TrimPrefix(name, "./")]
			if !ok {
				t.Errorf("install.md runs %s, which the block does not build", name)
				continue
			}
			if out, err := exec.Command(testtool.Binary(t, pkg), strings.Fields(args)...).CombinedOutput(); err != nil {
				t.Errorf("install.md: %s: %v\n%s", c, err, out)
			}
		}
	}
	for _, f := range append(gitFiles(t, "*.md"), "README.md") {
		if goInstRE.Match([]byte(readDoc(t, filepath.Join("..", f)))) {
			t.Errorf("%s says to go install github.com/gpuwatch/gpuwatch/...: the module is not published; build from a clone", f)
		}
	}
}

// TestQuickstartSlurmConfComplete: every slurm.conf line install.md requires
// is in the quickstart's slurm.conf block and in deploy/slurm/README.md.
func TestQuickstartSlurmConfComplete(t *testing.T) {
	required := strings.Split(marked(t, readDoc(t, "install.md"), "slurm.conf"), "\n")
	if len(required) < 3 {
		t.Fatalf("install.md requires only %q", required)
	}
	quick := strings.Split(marked(t, readDoc(t, "quickstart.md"), "slurm.conf"), "\n")
	readme := readDoc(t, "../deploy/slurm/README.md")
	for _, line := range required {
		line = strings.TrimSpace(line)
		if !contains(quick, line) {
			t.Errorf("quickstart.md's slurm.conf block lacks %q (install.md requires it)", line)
		}
		if !strings.Contains(readme, line) {
			t.Errorf("deploy/slurm/README.md lacks %q (install.md requires it)", line)
		}
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

// TestQuickstartInstallStarts runs the install commands of quickstart.md's
// "Slurm and bare metal" section into a private root, with the binaries its
// go build lines make, then verifies the installed units there with
// systemd-analyze (which fails a unit whose ExecStart binary the commands did
// not install), checks every file the units' environment files name is
// installed, and runs the installed analyzer's check-config on the installed
// configuration.
func TestQuickstartInstallStarts(t *testing.T) {
	text := section(t, readDoc(t, "quickstart.md"), "### Slurm and bare metal")
	built := builds(t, "quickstart.md", text)
	root := testtool.SystemdRoot(t)
	// The folders every machine (a Slurm node) has before the install.
	for _, d := range []string{"usr/bin", "etc/default", "etc/systemd/system", "etc/tmpfiles.d", "etc/slurm"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range commands(text) {
		args := strings.Fields(c)
		if args[0] != "install" {
			continue
		}
		runInstall(t, root, built, args[1:])
	}
	units, err := filepath.Glob(filepath.Join(root, "etc/systemd/system/*.service"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range units {
		names = append(names, filepath.Base(u))
	}
	sort.Strings(names)
	if strings.Join(names, " ") != "gpuwatch-analyzer.service gpuwatch-exporter.service" {
		t.Fatalf("the quickstart installs the units %v, want both", names)
	}
	testtool.VerifyUnits(t, root, names...)
	for _, n := range names {
		env := readDoc(t, filepath.Join(root, "etc/default", strings.TrimSuffix(n, ".service")))
		for _, m := range pathArgRE.FindAllStringSubmatch(env, -1) {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("/etc/default/%s names %s, which the quickstart does not install", strings.TrimSuffix(n, ".service"), m[1])
			}
		}
	}
	checkConfig := exec.Command(filepath.Join(root, "usr/bin/gpuwatch-analyzer"), "check-config",
		"--policy.file", filepath.Join(root, "etc/gpuwatch/policy.yml"), "--analyzer.config", filepath.Join(root, "etc/gpuwatch/analyzer.yml"))
	if out, err := checkConfig.CombinedOutput(); err != nil {
		t.Errorf("installed gpuwatch-analyzer check-config: %v\n%s", err, out)
	}
	// The epilog's end-of-job summary, and the binary it runs.
	epilog := readDoc(t, "../deploy/slurm/epilog")
	script := readDoc(t, "../deploy/slurm/job-summary")
	for _, p := range []string{summaryRE.FindStringSubmatch(epilog)[1], "/usr/bin/" + summaryBin.FindStringSubmatch(script)[1]} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the end-of-job summary needs %s, which the quickstart does not install", p)
		}
	}
}

// runInstall runs install(1) with args, every absolute path moved under root
// and every source taken from the repository, or from the binaries built.
func runInstall(t *testing.T, root string, built map[string]string, args []string) {
	t.Helper()
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" || a == "-o" || a == "-g":
			out = append(out, a, args[i+1])
			i++
		case strings.HasPrefix(a, "-"):
			out = append(out, a)
		case strings.HasPrefix(a, "/"):
			out = append(out, filepath.Join(root, a)+map[bool]string{true: "/"}[strings.HasSuffix(a, "/")])
		case built[a] != "":
			out = append(out, testtool.Binary(t, built[a]))
		default:
			out = append(out, filepath.Join("..", a))
		}
	}
	if b, err := exec.Command("install", out...).CombinedOutput(); err != nil {
		t.Errorf("install %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}
