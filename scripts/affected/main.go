// Command affected prints the packages the quick tier of scripts/test.sh
// tests: those holding a file changed since the merge base with a branch
// (committed, staged, unstaged or untracked), and the packages that import
// them, in each Go module of the repository (the product, deploy/, build/,
// build/licenses/). One line per module with something to test:
//
//	MODULE_DIR<TAB>IMPORT_PATH IMPORT_PATH ...
//
// A changed file other than Go source (a doc, a scenario, a chart) also
// selects the packages whose Go files name it, and the repository-wide
// checks of internal/repocheck; a changed go.mod or go.sum selects its
// whole module.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// pkg is what `go list -json` says of a package that this needs.
type pkg struct {
	ImportPath                         string
	Dir                                string
	GoFiles, TestGoFiles, XTestGoFiles []string
	Imports, TestImports, XTestImports []string
}

// module is one Go module of the repository and its packages.
type module struct {
	dir   string // relative to the repository root, "." for the product
	pkgs  []pkg
	byDir map[string]string // a package's folder, from the repository root -> its import path
}

// repoWide is the package of the checks over the repository as a whole,
// run whenever a file outside every package changes.
const repoWide = "github.com/gpuwatch/gpuwatch/internal/repocheck"

func main() {
	base := flag.String("base", "main", "the branch whose merge base with HEAD the changes are counted from")
	flag.Parse()
	root, err := git("rev-parse", "--show-toplevel")
	if err == nil {
		err = os.Chdir(strings.TrimSpace(root))
	}
	if err == nil {
		err = run(os.Stdout, *base)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "affected:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, base string) error {
	files, err := changedFiles(base)
	if err != nil {
		return err
	}
	mods, err := modules()
	if err != nil {
		return err
	}
	for _, m := range mods {
		sel := selectPackages(m, files, mods)
		if len(sel) > 0 {
			fmt.Fprintf(w, "%s\t%s\n", m.dir, strings.Join(sel, " "))
		}
	}
	return nil
}

// changedFiles lists the files that differ from the merge base of HEAD and
// base, in the work tree, plus the untracked ones git does not ignore.
func changedFiles(base string) ([]string, error) {
	mb, err := git("merge-base", "HEAD", base)
	if err != nil {
		return nil, fmt.Errorf("no merge base with %s: %w", base, err)
	}
	diff, err := git("diff", "--name-only", strings.TrimSpace(mb))
	if err != nil {
		return nil, err
	}
	untracked, err := git("ls-files", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range strings.Fields(diff + "\n" + untracked) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}

// modules lists the repository's Go modules and their packages.
func modules() ([]module, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	mods, err := git("ls-files", "go.mod", "*/go.mod")
	if err != nil {
		return nil, err
	}
	var out []module
	for _, f := range strings.Fields(mods) {
		dir := filepath.Dir(f)
		cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Dir,GoFiles,TestGoFiles,XTestGoFiles,Imports,TestImports,XTestImports", "./...")
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, stderr.Bytes())
		}
		m := module{dir: dir, byDir: map[string]string{}}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var p pkg
			if err := dec.Decode(&p); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list in %s: %w", dir, err)
			}
			m.pkgs = append(m.pkgs, p)
			if rel, err := filepath.Rel(wd, p.Dir); err == nil {
				m.byDir[filepath.ToSlash(rel)] = p.ImportPath
			}
		}
		out = append(out, m)
	}
	// The deepest module first, so a file belongs to the innermost one.
	sort.Slice(out, func(i, j int) bool { return depth(out[i].dir) > depth(out[j].dir) })
	return out, nil
}

func depth(dir string) int {
	if dir == "." {
		return 0
	}
	return strings.Count(dir, "/") + 1
}

// moduleOf is the innermost module holding the file.
func moduleOf(mods []module, file string) string {
	for _, m := range mods {
		if m.dir == "." || strings.HasPrefix(file, m.dir+"/") {
			return m.dir
		}
	}
	return "."
}

// selectPackages is m's packages that hold a changed file, or name one
// outside every package, and m's packages that import any package changed
// in any module.
func selectPackages(m module, files []string, mods []module) []string {
	sel := map[string]bool{}
	changed := map[string]bool{} // import paths changed, in every module
	for _, f := range files {
		if path.Base(f) == "go.mod" || path.Base(f) == "go.sum" {
			if moduleOf(mods, f) == m.dir {
				for _, p := range m.pkgs {
					sel[p.ImportPath] = true
				}
			}
			continue
		}
		for _, om := range mods {
			if moduleOf(mods, f) != om.dir {
				continue
			}
			if ip := owner(om, f); ip != "" {
				changed[ip] = true
			}
		}
		if !strings.HasSuffix(f, ".go") {
			// A doc, a scenario, a chart: read by the tests that name it,
			// in whichever module, and checked by the repository-wide ones.
			for _, ip := range naming(m, f) {
				sel[ip] = true
			}
			if m.dir == "." {
				sel[repoWide] = true
			}
		}
	}
	for _, p := range m.pkgs {
		if changed[p.ImportPath] {
			sel[p.ImportPath] = true
		}
		for _, l := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, im := range l {
				if changed[im] {
					sel[p.ImportPath] = true
				}
			}
		}
	}
	var out []string
	for _, p := range m.pkgs {
		if sel[p.ImportPath] && len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 {
			out = append(out, p.ImportPath)
		}
	}
	sort.Strings(out)
	return out
}

// owner is the import path of the package whose folder, or a folder
// under it (testdata, embedded files), holds f; "" when none does.
func owner(m module, f string) string {
	for d := path.Dir(f); ; d = path.Dir(d) {
		if ip, ok := m.byDir[d]; ok && d != "." {
			return ip
		}
		if d == "." || d == m.dir {
			return ""
		}
	}
}

// naming is m's packages with a Go file that names f, by its path from
// the repository's root or by its file name.
func naming(m module, f string) []string {
	var out []string
	for _, p := range m.pkgs {
		for _, l := range [][]string{p.GoFiles, p.TestGoFiles, p.XTestGoFiles} {
			found := false
			for _, g := range l {
				b, err := os.ReadFile(filepath.Join(p.Dir, g))
				if err == nil && (bytes.Contains(b, []byte(f)) || bytes.Contains(b, []byte(path.Base(f)))) {
					found = true
					break
				}
			}
			if found {
				out = append(out, p.ImportPath)
				break
			}
		}
	}
	return out
}

func git(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(b), nil
}
