package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const changelog = `# Changelog

## [Unreleased]

### Added
- a thing operators notice
`

// repo makes a git repository holding the real tag script and changelog.
func repo(t *testing.T, log string) string {
	t.Helper()
	dir := t.TempDir()
	script, err := os.ReadFile("../../scripts/tag-release.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "tag-release.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func gitEnv() []string {
	return append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "RELEASE_DATE=2026-12-01")
}

func tag(dir string, args ...string) (string, int) {
	cmd := exec.Command("bash", append([]string{"scripts/tag-release.sh"}, args...)...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return string(out), code
}

func TestTagRelease(t *testing.T) {
	dir := repo(t, changelog)
	out, code := tag(dir, "v0.1.0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if !strings.Contains(out, "scripts/release.sh v0.1.0") {
		t.Errorf("output does not name the next step: %s", out)
	}
	if got := strings.TrimSpace(git(t, dir, "describe", "--tags", "--exact-match")); got != "v0.1.0" {
		t.Errorf("HEAD is %q, want the tag v0.1.0 (release.sh stamps what git describe says)", got)
	}
	msg := git(t, dir, "tag", "-l", "--format=%(contents)", "v0.1.0")
	if !strings.Contains(msg, "a thing operators notice") {
		t.Errorf("tag message lacks the changelog section:\n%s", msg)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "CHANGELOG.md"))
	if !strings.Contains(string(log), "## [Unreleased]\n\n## [v0.1.0] - 2026-12-01\n\n### Added\n- a thing operators notice") {
		t.Errorf("changelog not rolled over:\n%s", log)
	}

	// The same version again, and a second release with nothing to say.
	if out, code := tag(dir, "v0.1.0"); code != 1 || !strings.Contains(out, "exists already") {
		t.Errorf("re-tagging v0.1.0: exit %d, %s", code, out)
	}
	if out, code := tag(dir, "v0.2.0"); code != 1 || !strings.Contains(out, "Unreleased section is empty") {
		t.Errorf("empty Unreleased section: exit %d, %s", code, out)
	}
}

func TestTagReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, log, version string
		dirty              bool
		code               int
		want               string
	}{
		{"no v", changelog, "0.1.0", false, 1, "not a semantic version"},
		{"two parts", changelog, "v1.2", false, 1, "not a semantic version"},
		{"dirty tree", changelog, "v0.1.0", true, 1, "uncommitted changes"},
		{"no section", "# Changelog\n", "v0.1.0", false, 1, "no '## [Unreleased]' section"},
		{"no argument", changelog, "", false, 2, "usage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := repo(t, tc.log)
			if tc.dirty {
				if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var args []string
			if tc.version != "" {
				args = []string{tc.version}
			}
			out, code := tag(dir, args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, want %d with %q: %s", code, tc.code, tc.want, out)
			}
			if strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Errorf("want one line, got:\n%s", out)
			}
		})
	}
}
