// Command testreport reads `go test -json` on its standard input and prints
// what a person wants from a test run: each package's result line, the
// whole output of every test that failed (or, with -v, of every test), and
// at the end how many tests (subtests included) passed, failed and were
// skipped, with each skip's reason. scripts/test.sh pipes every `go test`
// through it and, with -tally, appends the counts to a file whose totals
// -summary prints at the end of the run, so a change that drops tests or
// turns them into skips shows in the suite's own output.
//
// It exits 1 when a test or a package failed, so `set -o pipefail` fails the
// step even where go test's own status is lost.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
	Elapsed    float64
}

// counts is the tally of one step.
type counts struct {
	passed, failed, skipped int
	reasons                 map[string]int // skip reason -> tests
}

func (c *counts) add(o counts) {
	c.passed += o.passed
	c.failed += o.failed
	c.skipped += o.skipped
	if c.reasons == nil {
		c.reasons = map[string]int{}
	}
	for r, n := range o.reasons {
		c.reasons[r] += n
	}
}

func main() {
	verbose := flag.Bool("v", false, "print every test's output, not only that of the tests that failed")
	step := flag.String("step", "go test", "the step's name in the tally")
	tally := flag.String("tally", "", "append the step's counts to this file")
	summary := flag.String("summary", "", "print the totals of a tally file and exit")
	slowest := flag.Int("slowest", 0, "print the N slowest top-level tests at the end")
	flag.Parse()
	if *summary != "" {
		if err := printSummary(os.Stdout, *summary); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
		return
	}
	c, failed, err := report(os.Stdin, os.Stdout, *verbose, *slowest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d tests ran: %d passed, %d failed, %d skipped\n", *step, c.passed+c.failed, c.passed, c.failed, c.skipped)
	printReasons(os.Stdout, c.reasons)
	if *tally != "" {
		if err := appendTally(*tally, *step, c); err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// report copies the run's output to w as described above and tallies it.
// failed is true when any test or package failed, or a build failed.
func report(r io.Reader, w io.Writer, verbose bool, slowest int) (counts, bool, error) {
	rp := &reporter{w: w, verbose: verbose, slowest: slowest, held: map[string][]string{}}
	rp.c.reasons = map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			// go test prints some failures (a vet error, a missing package) as plain text.
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		rp.event(e)
	}
	if err := sc.Err(); err != nil {
		return rp.c, true, err
	}
	rp.printSlowest()
	return rp.c, rp.failed, nil
}

// reporter follows one go test -json stream.
type reporter struct {
	w       io.Writer
	verbose bool
	slowest int
	c       counts
	failed  bool
	// held is the output of the tests still running, by package and test
	// ("" is the package's own), printed if they fail and dropped if they
	// pass.
	held  map[string][]string
	times []timing
}

type timing struct {
	name string
	s    float64
}

func heldKey(e event) string { return e.Package + "\x00" + e.Test }

func (rp *reporter) event(e event) {
	switch e.Action {
	case "build-output":
		fmt.Fprint(rp.w, e.Output)
	case "build-fail":
		rp.failed = true
	case "output":
		switch {
		case rp.verbose:
			fmt.Fprint(rp.w, e.Output)
		case e.Test == "" && isResultLine(e.Output):
			// The package's own lines: "ok", "FAIL", "?", a panic, a timeout.
			fmt.Fprint(rp.w, e.Output)
		default:
			rp.held[heldKey(e)] = append(rp.held[heldKey(e)], e.Output)
		}
	case "pass", "fail", "skip":
		rp.end(e)
	}
}

// end counts a test's (or a package's) end and prints a failure's output.
func (rp *reporter) end(e event) {
	k := heldKey(e)
	out := rp.held[k]
	delete(rp.held, k)
	if e.Test == "" {
		if e.Action == "fail" {
			rp.failed = true
			if !rp.verbose {
				// A package that fails outside a test (a panic, a
				// timeout, TestMain) left its lines, and those of the
				// tests it cut short, held: print them all.
				printHeld(rp.w, e.Package, rp.held, out)
			}
		}
		return
	}
	switch e.Action {
	case "pass":
		rp.c.passed++
	case "fail":
		rp.c.failed++
		rp.failed = true
		if !rp.verbose {
			fmt.Fprint(rp.w, strings.Join(out, ""))
		}
	case "skip":
		rp.c.skipped++
		rp.c.reasons[skipReason(out)]++
	}
	if rp.slowest > 0 && !strings.Contains(e.Test, "/") {
		rp.times = append(rp.times, timing{e.Package + " " + e.Test, e.Elapsed})
	}
}

func (rp *reporter) printSlowest() {
	if rp.slowest <= 0 {
		return
	}
	times := rp.times
	sort.Slice(times, func(i, j int) bool { return times[i].s > times[j].s })
	if len(times) > rp.slowest {
		times = times[:rp.slowest]
	}
	fmt.Fprintf(rp.w, "slowest tests:\n")
	for _, t := range times {
		fmt.Fprintf(rp.w, "%8.1f s  %s\n", t.s, t.name)
	}
}

// isResultLine says whether a package-level output line is the one go test
// prints without -v: "ok  pkg 1.2s", "FAIL pkg", "?   pkg [no test files]".
func isResultLine(s string) bool {
	return strings.HasPrefix(s, "ok  \t") || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "?   \t")
}

// printHeld prints what a failed package left unprinted: its own lines
// and those of its unfinished tests, in test name order.
func printHeld(w io.Writer, pkg string, held map[string][]string, own []string) {
	var keys []string
	for k := range held {
		if strings.HasPrefix(k, pkg+"\x00") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprint(w, strings.Join(held[k], ""))
		delete(held, k)
	}
	fmt.Fprint(w, strings.Join(own, ""))
}

// logPrefix is what testing puts before a t.Log line: indentation and
// file:line.
var logPrefix = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

// skipReason is the last line a skipped test logged (t.Skip's message),
// without its file:line; "(no reason given)" when it logged none.
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		l := out[i]
		if loc := logPrefix.FindStringIndex(l); loc != nil {
			return strings.TrimSpace(l[loc[1]:])
		}
	}
	return "(no reason given)"
}

func printReasons(w io.Writer, reasons map[string]int) {
	rs := make([]string, 0, len(reasons))
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		if reasons[rs[i]] != reasons[rs[j]] {
			return reasons[rs[i]] > reasons[rs[j]]
		}
		return rs[i] < rs[j]
	})
	for _, r := range rs {
		fmt.Fprintf(w, "  skipped %4d: %s\n", reasons[r], r)
	}
}

// appendTally writes one line per step and one per skip reason:
// "step\tNAME\tPASSED\tFAILED\tSKIPPED" and "skip\tNAME\tN\tREASON".
func appendTally(path, step string, c counts) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "step\t%s\t%d\t%d\t%d\n", clean(step), c.passed, c.failed, c.skipped)
	for r, n := range c.reasons {
		fmt.Fprintf(f, "skip\t%s\t%d\t%s\n", clean(step), n, clean(r))
	}
	return f.Close()
}

func clean(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }

// printSummary prints a tally file's steps and totals.
func printSummary(w io.Writer, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var total counts
	total.reasons = map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Split(l, "\t")
		switch {
		case len(f) == 5 && f[0] == "step":
			var n [3]int
			for i := range n {
				if n[i], err = strconv.Atoi(f[2+i]); err != nil {
					return fmt.Errorf("%s: %q: %w", path, l, err)
				}
			}
			fmt.Fprintf(w, "%7d ran %6d skipped  %s\n", n[0]+n[1], n[2], f[1])
			total.add(counts{passed: n[0], failed: n[1], skipped: n[2]})
		case len(f) == 4 && f[0] == "skip":
			n, err := strconv.Atoi(f[2])
			if err != nil {
				return fmt.Errorf("%s: %q: %w", path, l, err)
			}
			total.reasons[f[3]] += n
		case l == "":
		default:
			return fmt.Errorf("%s: unreadable line %q", path, l)
		}
	}
	fmt.Fprintf(w, "%7d ran %6d skipped  in all (%d passed, %d failed)\n", total.passed+total.failed, total.skipped, total.passed, total.failed)
	printReasons(w, total.reasons)
	return nil
}
