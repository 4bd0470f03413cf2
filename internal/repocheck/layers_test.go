package repocheck

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/gpuwatch/gpuwatch"

// layerList reads docs/architecture.md's layer list: one layer per line,
// highest first, its package patterns before the first run of two spaces.
func layerList(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- layers -->\\s*```\\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/architecture.md has no layer list (<!-- layers --> and a fenced block)")
	}
	var layers [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		pats, _, _ := strings.Cut(line, "  ")
		layers = append(layers, strings.Fields(pats))
	}
	return layers
}

// layerOf returns the index of the layer whose most specific pattern
// places pkg (a path relative to the module), or -1.
func layerOf(layers [][]string, pkg string) int {
	best, bestLen := -1, -1
	for i, l := range layers {
		for _, p := range l {
			n := -1
			if base, ok := strings.CutSuffix(p, "/..."); ok {
				if pkg == base || strings.HasPrefix(pkg, base+"/") {
					n = len(base)
				}
			} else if pkg == p {
				n = len(p) + 1 // an exact name beats a subtree of the same length
			}
			if n > bestLen {
				best, bestLen = i, n
			}
		}
	}
	return best
}

// TestLayers: no import runs from a lower layer to a higher one, and
// every package of the module is placed. Zero exceptions: a new edge
// that runs up means the package is in the wrong place, or the code is.
func TestLayers(t *testing.T) {
	layers := layerList(t)
	imports := map[string]map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files(t) {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		// Nested modules (deploy/, build/) stand apart: the product's
		// module never imports them.
		if strings.HasPrefix(f, "deploy/") || strings.HasPrefix(f, "build/") {
			continue
		}
		af, err := parser.ParseFile(fset, filepath.Join(root, f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		pkg := filepath.ToSlash(filepath.Dir(f))
		if imports[pkg] == nil {
			imports[pkg] = map[string]bool{}
		}
		for _, im := range af.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				imports[pkg][rel] = true
			}
		}
	}
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	if len(pkgs) < 50 {
		t.Fatalf("only %d packages read", len(pkgs))
	}
	for _, p := range pkgs {
		lp := layerOf(layers, p)
		if lp < 0 {
			t.Errorf("package %s is in no layer of docs/architecture.md", p)
			continue
		}
		for im := range imports[p] {
			li := layerOf(layers, im)
			if li < 0 {
				t.Errorf("package %s (imported by %s) is in no layer", im, p)
				continue
			}
			// Layers are listed highest first: a lower index is higher.
			if li < lp {
				t.Errorf("%s (layer %d: %s) imports %s (layer %d: %s): an import up the layers",
					p, len(layers)-lp, strings.Join(layers[lp], " "), im, len(layers)-li, strings.Join(layers[li], " "))
			}
		}
	}
}

// TestLayerOfIsMostSpecific guards the rule the list relies on.
func TestLayerOfIsMostSpecific(t *testing.T) {
	layers := [][]string{{"cmd/..."}, {"analyzer/internal/..."}, {"analyzer/report/..."}, {"internal/..."}}
	for pkg, want := range map[string]int{"cmd/internal/analyzercmd": 0, "analyzer/internal/simload": 1,
		"analyzer/report/reporttest": 2, "internal/cronspec": 3, "analyzer/detect": -1, "cmdx": -1} {
		if got := layerOf(layers, pkg); got != want {
			t.Errorf("layerOf(%s) = %d, want %d", pkg, got, want)
		}
	}
}
