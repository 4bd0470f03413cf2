package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportOnRealGoTest tallies what `go test -json` itself prints for a
// package with a passing, a failing and a skipped test and a skipped
// subtest: the counts, the skip reasons, the failed test's output shown and
// the passing test's hidden.
func TestReportOnRealGoTest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/tally\n\ngo 1.22\n")
	write("tally_test.go", `package tally

import "testing"

func TestPasses(t *testing.T) { t.Log("quiet when it passes") }
func TestFails(t *testing.T)  { t.Error("the reason it failed") }
func TestSkips(t *testing.T)  { t.Skip("needs a GPU") }
func TestTable(t *testing.T) {
	t.Run("one", func(t *testing.T) {})
	t.Run("two", func(t *testing.T) { t.Skip("needs a GPU") })
}
`)
	cmd := exec.Command("go", "test", "-json", "-count=1", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	in, err := cmd.Output()
	if err == nil {
		t.Fatal("go test passed a package with a failing test")
	}
	var out bytes.Buffer
	c, failed, err := report(bytes.NewReader(in), &out, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !failed || c.passed != 3 || c.failed != 1 || c.skipped != 2 || c.reasons["needs a GPU"] != 2 {
		t.Errorf("failed %v, %d passed, %d failed, %d skipped, reasons %v; want true, 3 (Passes, Table, Table/one), 1, 2, 2 × \"needs a GPU\"",
			failed, c.passed, c.failed, c.skipped, c.reasons)
	}
	got := out.String()
	if !strings.Contains(got, "the reason it failed") || strings.Contains(got, "quiet when it passes") ||
		!strings.Contains(got, "FAIL\texample.com/tally") {
		t.Errorf("printed:\n%s", got)
	}
}
