package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines bounds a function of the product (every module of the
// repository, tests aside), from `func` to its closing brace: a longer one
// holds more than one idea, and code is read more often than written.
const maxFuncLines = 80

// longFuncs returns "name: n lines" for each function declared in src that
// is longer than maxFuncLines.
func longFuncs(fset *token.FileSet, name string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var long []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n > maxFuncLines {
			long = append(long, fmt.Sprintf("%s: %d lines", fd.Name.Name, n))
		}
	}
	return long, nil
}

// The measure itself: a function one line over the bound is caught, one at
// the bound is not.
func TestLongFuncsMeasure(t *testing.T) {
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("atBound", maxFuncLines) + body("over", maxFuncLines+1)
	long, err := longFuncs(token.NewFileSet(), "p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("over: %d lines", maxFuncLines+1); len(long) != 1 || long[0] != want {
		t.Fatalf("longFuncs = %q, want [%q]", long, want)
	}
}

// No function outside tests is over maxFuncLines lines, in any module of
// the repository: commands, exporter, analyzer, tools alike.
func TestNoLongFuncs(t *testing.T) {
	fset := token.NewFileSet()
	eachGoFile(t, false, func(f string, src []byte) ([]string, error) {
		long, err := longFuncs(fset, f, src)
		for i, l := range long {
			long[i] = fmt.Sprintf("func %s (at most %d): split it by idea", l, maxFuncLines)
		}
		return long, err
	})
}

// eachGoFile runs check on every Go file of the repository (tests too
// when withTests), testdata aside, and reports each problem it returns
// under the file's name; it fails when it read too few files to mean
// anything.
func eachGoFile(t *testing.T, withTests bool, check func(f string, src []byte) ([]string, error)) {
	t.Helper()
	checked := 0
	for _, f := range files(t) {
		if filepath.Ext(f) != ".go" || (!withTests && strings.HasSuffix(f, "_test.go")) || strings.Contains(f, "/testdata/") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		problems, err := check(f, src)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", f, p)
		}
		checked++
	}
	if checked < 100 {
		t.Fatalf("only %d Go files read: the check read too little", checked)
	}
}
