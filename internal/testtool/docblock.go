package testtool

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ReplaceDocBlock replaces the generated block called name in the Markdown
// file at path with body: what lies between the line that opens with
// "<!-- name:begin" (kept, it says how the block is written) and
// "<!-- name:end -->". A benchmark writes its measured row this way, so a
// figure in the docs is the one a run printed.
func ReplaceDocBlock(path, name, body string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	begin, end := "<!-- "+name+":begin", "<!-- "+name+":end -->"
	s := string(doc)
	b, e := strings.Index(s, begin), strings.Index(s, end)
	if b < 0 || e < b {
		return fmt.Errorf("%s: no %s ... %s block", path, begin, end)
	}
	head := s[b:]
	head = head[:strings.Index(head, "\n")+1]
	return os.WriteFile(path, []byte(s[:b]+head+body+s[e:]), 0o644)
}

// WriteBenchRow writes a benchmark's measured row (a Markdown table row
// of what, figure and how) into the generated block called block of the
// file that $GPUWATCH_BENCH_WRITE_DOC names, and does nothing when it
// names none: CI measures without touching the tree, and a developer
// regenerates docs/performance.md from one run.
func WriteBenchRow(t testing.TB, block, row string) {
	t.Helper()
	path := os.Getenv("GPUWATCH_BENCH_WRITE_DOC")
	if path == "" {
		return
	}
	if err := ReplaceDocBlock(path, block, "| what | figure | how |\n|---|---|---|\n"+row); err != nil {
		t.Fatal(err)
	}
}

// LoadAverage is the machine's 1-minute load as /proc/loadavg gives it,
// "unknown" where it cannot be read: a figure says how busy the machine
// that measured it was.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// Thousands writes n with a comma between each group of three digits, as
// the docs' figures are written.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
