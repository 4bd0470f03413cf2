package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	cliFlagRE = regexp.MustCompile("(?m)^\\| `--([a-z0-9.-]+)`")
	oldFlagRE = regexp.MustCompile(`OldSpelling\(\w+, "([^"]+)"`)
	docFlagRE = regexp.MustCompile(`(?:^|[^\w-])--([a-z][a-z0-9.-]*[a-z0-9])`)
	// A command at the start of a command line: the line's start, a code
	// span's, or after a pipe, ;, && or a prompt.
	commandRE  = regexp.MustCompile("(?:^\\s*|[`(|;&]\\s*|\\$\\s+)(?:[A-Z_]+=\\S*\\s+)*([^\\s`]+)\\s")
	builtInCLI = map[string]bool{"help": true, "version": true}
)

// TestFlagSpellings: every gpuwatch flag a document names is spelled as
// docs/cli.md (generated from the flag definitions) lists it: no document
// uses a retired spelling (kept hidden for old scripts) anywhere, and a flag
// on a gpuwatch command line is one the binaries define.
func TestFlagSpellings(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range []string{"cli.md", "cli-analyzer.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cliFlagRE.FindAllStringSubmatch(string(b), -1) {
			listed[m[1]] = true
		}
	}
	if len(listed) < 20 {
		t.Fatalf("only %d flags read from cli.md", len(listed))
	}
	files := gitFiles(t, "*.go")
	retired := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range oldFlagRE.FindAllStringSubmatch(string(b), -1) {
			retired[m[1]] = true
		}
	}
	if len(retired) == 0 {
		t.Fatal("no retired spellings found: has command.OldSpelling moved?")
	}
	for _, f := range gitFiles(t, "*.md") {
		if f == "docs/cli.md" || f == "docs/cli-analyzer.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		cont := false // the previous line continues a gpuwatch command line (\)
		for i, line := range strings.Split(string(b), "\n") {
			gpuwatchLine := cont
			for _, m := range docFlagRE.FindAllStringSubmatchIndex(line, -1) {
				name := line[m[2]:m[3]]
				if retired[name] && !listed[name] {
					t.Errorf("%s:%d: --%s is a retired spelling; docs/cli.md lists the current one", f, i+1, name)
					continue
				}
				// The command the flag belongs to: the last one named before it.
				cmds := commandRE.FindAllStringSubmatch(line[:m[2]], -1)
				if len(cmds) > 0 && !strings.HasPrefix(cmds[len(cmds)-1][1], "--") {
					gpuwatchLine = strings.HasPrefix(cmds[len(cmds)-1][1], "gpuwatch")
				}
				if !gpuwatchLine {
					continue
				}
				if !listed[name] && !builtInCLI[name] {
					t.Errorf("%s:%d: --%s is not a flag docs/cli.md lists", f, i+1, name)
				}
			}
			if strings.HasSuffix(strings.TrimSpace(line), "\\") {
				cont = gpuwatchLine || cont && len(commandRE.FindAllString(line, -1)) == 0
				if !cont {
					cmds := commandRE.FindAllStringSubmatch(line, -1)
					cont = len(cmds) > 0 && strings.HasPrefix(cmds[len(cmds)-1][1], "gpuwatch")
				}
			} else {
				cont = false
			}
		}
	}
}

func gitFiles(t *testing.T, pattern string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files", "--cached", "--others", "--exclude-standard", pattern).Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	return strings.Fields(string(out))
}
