package repocheck

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const root = "../.."

// files returns the repository's tracked and untracked, not ignored, text
// files, relative to root.
func files(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var fs []string
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		switch filepath.Ext(f) {
		case ".go", ".md", ".sh", ".yaml", ".yml", ".tmpl", ".html", ".txt", ".service", ".conf", "":
			if _, err := os.Stat(filepath.Join(root, f)); err == nil {
				fs = append(fs, f)
			}
		}
	}
	return fs
}

var (
	urlRE     = regexp.MustCompile(`[a-z]+://[^\s)"'>]+`)
	mdNameRE  = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	mdLinkRE  = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	processRE = regexp.MustCompile(`(?i)\b(the issue (asks|says|wants|requires|demands)|as (the )?issue \d+|issue #?\d+ (asks|says|wants)|the lead (asked|wants)|DESIGN\.md)`)
)

// Every Markdown file a file names, and every relative link in the docs,
// is in the repository: nothing points at notes kept elsewhere.
func TestNoReferenceOutside(t *testing.T) {
	fs := files(t)
	have := map[string]bool{}
	base := map[string]bool{}
	for _, f := range fs {
		have[f] = true
		base[path.Base(f)] = true
	}
	for _, f := range fs {
		if f == "build/licenses/exceptions.txt" {
			continue // names licence files inside other modules
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		text := urlRE.ReplaceAllString(string(b), "")
		for _, m := range mdNameRE.FindAllString(text, -1) {
			if strings.HasPrefix(m, "/") {
				continue // a path on the machine gpuwatch is installed on
			}
			if !have[m] && !have[path.Join(path.Dir(f), m)] && !base[path.Base(m)] {
				t.Errorf("%s names %s, which is not in the repository", f, m)
			}
		}
		if filepath.Ext(f) != ".md" {
			continue
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(text, -1) {
			target := path.Clean(path.Join(path.Dir(f), m[1]))
			if _, err := os.Stat(filepath.Join(root, target)); err != nil {
				t.Errorf("%s links to %s, which is not in the repository", f, m[1])
			}
		}
	}
}

// Comments and docs describe the code, not the conversation that produced
// it.
func TestNoProcessComments(t *testing.T) {
	for _, f := range files(t) {
		if strings.HasPrefix(f, "internal/repocheck/") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := processRE.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what the code does and why, not where a requirement came from", f, i+1, m)
			}
		}
	}
}
