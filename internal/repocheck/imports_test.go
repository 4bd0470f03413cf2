package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// importClass is where an import belongs in goimports' grouping with
// -local for this module: the standard library, then third-party
// modules, then this module, each group apart.
func importClass(path string) int {
	switch first, _, _ := strings.Cut(path, "/"); {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case !strings.Contains(first, "."):
		return 0
	default:
		return 1
	}
}

var importClassNames = []string{"standard library", "third-party", "this module"}

// importGrouping says what is wrong with the grouping of src's imports:
// each blank-line-separated group holds one class, and the groups go
// standard library, third-party, this module, no class in two groups.
func importGrouping(fset *token.FileSet, name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT || !gd.Lparen.IsValid() {
			continue
		}
		last, lastLine, seen := -1, 0, map[int]bool{}
		for _, spec := range gd.Specs {
			is := spec.(*ast.ImportSpec)
			path := strings.Trim(is.Path.Value, `"`)
			c, line := importClass(path), fset.Position(is.Pos()).Line
			if is.Doc != nil {
				line = fset.Position(is.Doc.Pos()).Line
			}
			newGroup := last < 0 || line > lastLine+1
			switch {
			case !newGroup && c != last:
				problems = append(problems, fmt.Sprintf("%q (%s) shares a group with %s imports", path, importClassNames[c], importClassNames[last]))
			case newGroup && seen[c] && c != last:
				problems = append(problems, fmt.Sprintf("%q: a second group of %s imports", path, importClassNames[c]))
			case newGroup && c < last:
				problems = append(problems, fmt.Sprintf("%q: %s imports after %s ones", path, importClassNames[c], importClassNames[last]))
			}
			seen[c], last, lastLine = true, c, fset.Position(is.End()).Line
		}
	}
	return problems, nil
}

// The rule itself, on a file written right and three written wrong.
func TestImportGroupingRule(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{"import (\n\t\"fmt\"\n\n\t\"k8s.io/x\"\n\n\t\"" + module + "/a\"\n)\n", 0},
		{"import (\n\t\"" + module + "/a\"\n\n\t\"fmt\"\n)\n", 1},
		{"import (\n\t\"fmt\"\n\t\"k8s.io/x\"\n)\n", 1},
		{"import (\n\t\"fmt\"\n\n\t\"k8s.io/x\"\n\n\t\"os\"\n)\n", 1},
	} {
		got, err := importGrouping(token.NewFileSet(), "p.go", []byte("package p\n\n"+tc.src))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("%q: %q, want %d problems", tc.src, got, tc.want)
		}
	}
}

// Every Go file of the repository groups its imports as goimports does
// with -local for this module, so that a reader finds the module's own
// dependencies in one place.
func TestImportGrouping(t *testing.T) {
	fset := token.NewFileSet()
	eachGoFile(t, true, func(f string, src []byte) ([]string, error) {
		problems, err := importGrouping(fset, f, src)
		for i, p := range problems {
			problems[i] = fmt.Sprintf("%s (goimports -local %s -w %s)", p, module, f)
		}
		return problems, err
	})
}
