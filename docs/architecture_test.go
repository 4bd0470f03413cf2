package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

var (
	walkSectionRE = regexp.MustCompile(`(?s)### Adding a waste pattern\n(.*?)\n### `)
	backtickRE    = regexp.MustCompile("`([a-z][a-z0-9_./<>-]*)`")
	stepRE        = regexp.MustCompile(`(?m)^\d+\. `)
)

// TestAddingAPatternWalkthrough keeps architecture.md's walk-through true:
// its numbered steps are the files a pattern touches and their count is the
// one the text states, every path it names exists, each pattern's detector
// lives in analyzer/detect/<pattern>.go and registers itself there, and the
// registration reads as the text shows it.
func TestAddingAPatternWalkthrough(t *testing.T) {
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	m := walkSectionRE.FindSubmatch(b)
	if m == nil {
		t.Fatal("architecture.md has no \"### Adding a waste pattern\" section")
	}
	text := string(m[1])
	steps := len(stepRE.FindAllString(text, -1))
	words := map[int]string{1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
	if steps == 0 || steps > 3 || !strings.Contains(text, "touches "+words[steps]+" files") {
		t.Errorf("the walk-through has %d steps; it must say it \"touches %s files\", at most three", steps, words[steps])
	}
	for _, p := range backtickRE.FindAllStringSubmatch(text, -1) {
		path := p[1]
		if !strings.Contains(path, "/") {
			continue
		}
		if strings.Contains(path, "<pattern>") {
			for _, pat := range schema.Patterns {
				checkPath(t, strings.ReplaceAll(path, "<pattern>", string(pat)))
			}
			continue
		}
		checkPath(t, path)
	}
	for _, pat := range schema.Patterns {
		src, err := os.ReadFile(filepath.Join("..", "analyzer", "detect", string(pat)+".go"))
		if err != nil {
			t.Errorf("pattern %s: its detector is not in analyzer/detect/%s.go: %v", pat, pat, err)
			continue
		}
		if !strings.Contains(string(src), "register(schema.") {
			t.Errorf("analyzer/detect/%s.go does not register its pattern as the walk-through shows", pat)
		}
	}
	reg, err := os.ReadFile(filepath.Join("..", "analyzer", "detect", "registry.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reg), "func register(p schema.Pattern, s Spec)") || !strings.Contains(text, "register(schema.<Pattern>, Spec{") {
		t.Error("the walk-through's register call no longer matches analyzer/detect/registry.go")
	}
}

func checkPath(t *testing.T, path string) {
	t.Helper()
	if strings.HasSuffix(path, "_test.go") {
		return // the step creates it
	}
	if _, err := os.Stat(filepath.Join("..", path)); err != nil {
		t.Errorf("architecture.md's walk-through names %s, which does not exist", path)
	}
}
