// Command licenses checks that every module linked into gpuwatch's programs
// carries a licence that an Apache-2.0 project may ship: it lists the
// packages the given patterns build (go list -deps), finds each module's
// licence files where go list says the module lies (the module cache, or a
// replace directory), and identifies them with github.com/google/licensecheck,
// the classifier behind pkg.go.dev's licence display.
//
//	go run . [-C dir] [pattern...]       (default: -C ../.. ./...)
//
// It prints one line per module (path, version, licences found) and exits 1
// when a module's licence is missing, unrecognised or not allowed, 2 on a bad
// flag or a failed go list. This module stands apart from gpuwatch's own so
// that the classifier never enters the product's build or test graph.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/licensecheck"
)

// allowed are the licences (licensecheck's IDs, SPDX where SPDX has one)
// that an Apache-2.0 binary may include: no conditions, or notice only.
// MPL-2.0 is here too: its conditions cover changes to its own files only
// (file-level copyleft), which shipping unchanged modules satisfies. Anything
// not listed (GPL, LGPL, AGPL, SSPL, a non-commercial clause, a licence the
// classifier does not know) fails until a person reads it and lists it here.
// licensecheck's own Type field is not used: v0.3.1 sets it for few licences.
var allowed = map[string]bool{
	"0BSD":         true,
	"Apache-2.0":   true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"CC0-1.0":      true,
	"ISC":          true,
	"MIT":          true,
	"MPL-2.0":      true,
	"Unlicense":    true,
	"Zlib":         true,
	// Attribution only, as a NOTICE file gives; svgo uses it.
	"CC-BY-4.0": true,
	// The SIL Open Font License allows bundling fonts with any software;
	// the plot library embeds the Liberation fonts under it.
	"OFL-1.1": true,
}

// minCoverage is the share of a licence file that must be recognised text:
// below it the file holds something the classifier does not know (an added
// clause, another licence), and a person must read it.
const minCoverage = 75

// licenceFile matches the names pkg.go.dev reads as licence files.
var licenceFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|unlicense)([.-].*)?$`)

// exceptions are licence files read by a person and accepted although the
// classifier cannot pass them, each pinned to the file's SHA-256: a changed
// text fails again until it is read again. See exceptions.txt.
//
//go:embed exceptions.txt
var exceptionsText string

type exception struct{ module, file, sum string }

func parseExceptions(text string) (map[exception]bool, error) {
	ex := map[exception]bool{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 {
			return nil, fmt.Errorf("exceptions.txt:%d: want: module file sha256 reason", i+1)
		}
		ex[exception{f[0], f[1], f[2]}] = true
	}
	return ex, nil
}

type module struct {
	Path    string
	Version string
	Dir     string
	Main    bool
	Replace *module
}

type pkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	Module     *module
}

// result is what the check found for one module.
type result struct {
	mod      module
	licences []string // "ID (file)" for each match
	problems []string
}

func main() {
	dir := flag.String("C", "../..", "the module whose dependencies are checked")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: licenses [-C dir] [pattern...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	patterns := flag.Args()
	if len(patterns) == 0 {
		patterns = []string{"./..."}
	}
	pkgs, err := list(*dir, patterns)
	if err != nil {
		fmt.Fprintf(os.Stderr, "licenses: %v\n", err)
		os.Exit(2)
	}
	ex, err := parseExceptions(exceptionsText)
	if err != nil {
		fmt.Fprintf(os.Stderr, "licenses: %v\n", err)
		os.Exit(2)
	}
	results := check(pkgs, ex)
	bad := report(os.Stdout, results)
	if bad > 0 {
		fmt.Fprintf(os.Stderr, "licenses: %d of %d modules have a licence that is missing, unrecognised or not allowed (see the lines marked FAIL)\n", bad, len(results))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stdout, "licenses: all %d modules allowed\n", len(results))
}

// list runs go list -deps in dir over patterns.
func list(dir string, patterns []string) ([]pkg, error) {
	args := append([]string{"list", "-deps", "-json=ImportPath,Dir,Standard,Module"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %v: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// check groups pkgs by module and classifies each module's licence files.
func check(pkgs []pkg, ex map[exception]bool) []result {
	type entry struct {
		mod  module
		dirs []string
	}
	mods := map[string]*entry{}
	for _, p := range pkgs {
		if p.Standard || p.Module == nil {
			continue
		}
		m := *p.Module
		if m.Replace != nil {
			m.Dir = m.Replace.Dir
			if m.Replace.Version != "" {
				m.Version = m.Replace.Version
			}
		}
		e := mods[m.Path]
		if e == nil {
			e = &entry{mod: m}
			mods[m.Path] = e
		}
		e.dirs = append(e.dirs, p.Dir)
	}
	var results []result
	for _, e := range mods {
		results = append(results, classify(e.mod, e.dirs, ex))
	}
	sort.Slice(results, func(i, j int) bool { return results[i].mod.Path < results[j].mod.Path })
	return results
}

// classify finds the licence files of m: those at its root, and for a
// package without one in reach there, those between the package and the root.
func classify(m module, pkgDirs []string, ex map[exception]bool) result {
	r := result{mod: m}
	if m.Dir == "" {
		r.problems = append(r.problems, "module has no directory (not downloaded? run go mod download)")
		return r
	}
	files := licenceFiles(m.Dir)
	if len(files) == 0 {
		seen := map[string]bool{}
		for _, d := range pkgDirs {
			for d != m.Dir && strings.HasPrefix(d, m.Dir) {
				for _, f := range licenceFiles(d) {
					if !seen[f] {
						seen[f] = true
						files = append(files, f)
					}
				}
				d = filepath.Dir(d)
			}
		}
	}
	if rest, nested := strings.CutPrefix(m.Path, repoModule+"/"); len(files) == 0 && nested {
		// A module nested in this repository (build, deploy) is under the
		// repository's licence, in the root module's folder.
		root := m.Dir
		for range strings.Split(rest, "/") {
			root = filepath.Dir(root)
		}
		files = licenceFiles(root)
	}
	if len(files) == 0 {
		r.problems = append(r.problems, "no licence file")
		return r
	}
	for _, f := range files {
		text, err := readBounded(f, 1<<20)
		if err != nil {
			r.problems = append(r.problems, err.Error())
			continue
		}
		rel, _ := filepath.Rel(m.Dir, f)
		sum := sha256.Sum256(text)
		if ex[exception{m.Path, filepath.ToSlash(rel), hex.EncodeToString(sum[:])}] {
			r.licences = append(r.licences, fmt.Sprintf("accepted by exceptions.txt (%s)", rel))
			continue
		}
		cov := licensecheck.Scan(text)
		if len(cov.Match) == 0 {
			r.problems = append(r.problems, fmt.Sprintf("%s: no known licence in it (sha256 %x)", rel, sum))
			continue
		}
		for _, match := range cov.Match {
			r.licences = append(r.licences, fmt.Sprintf("%s (%s)", match.ID, rel))
			if !allowed[match.ID] {
				r.problems = append(r.problems, fmt.Sprintf("%s: %s is not allowed", rel, match.ID))
			}
		}
		if cov.Percent < minCoverage {
			r.problems = append(r.problems, fmt.Sprintf("%s: only %.0f%% is known licence text (sha256 %x)", rel, cov.Percent, sum))
		}
	}
	return r
}

// repoModule is the root module of this repository.
const repoModule = "github.com/gpuwatch/gpuwatch"

func licenceFiles(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var files []string
	for _, e := range entries {
		if e.Type().IsRegular() && licenceFile.MatchString(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// report writes one line per module and returns how many failed.
func report(w io.Writer, results []result) int {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	bad := 0
	for _, r := range results {
		status := "ok  "
		if len(r.problems) > 0 {
			status = "FAIL"
			bad++
		}
		version := r.mod.Version
		if r.mod.Main {
			version = "(this module)"
		}
		fmt.Fprintf(bw, "%s %s %s: %s", status, r.mod.Path, version, strings.Join(r.licences, ", "))
		if len(r.problems) > 0 {
			fmt.Fprintf(bw, " -- %s", strings.Join(r.problems, "; "))
		}
		fmt.Fprintln(bw)
	}
	return bad
}
