package chartfiles

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chart = "../gpuwatch"

// TestChartCopiesInSync fails when rules/ or the dashboards changed without
// `(cd deploy && go generate ./helm/...)`.
func TestChartCopiesInSync(t *testing.T) {
	diff, err := Diff(chart)
	if err != nil {
		t.Fatal(err)
	}
	if len(diff) > 0 {
		t.Fatalf("the chart's copies are out of date (run (cd deploy && go generate ./helm/...)):\n%s", strings.Join(diff, "\n"))
	}
}

// TestDiffCatchesDrift: an edited, a missing and a stale copy are each
// reported, and Write repairs all three.
func TestDiffCatchesDrift(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	if d, err := Diff(dir); err != nil || len(d) != 0 {
		t.Fatalf("fresh copy: %v %v", d, err)
	}
	want, _ := Want()
	var rule, dash string
	for p := range want {
		if strings.HasPrefix(p, RulesDir) {
			rule = p
		} else {
			dash = p
		}
	}
	if err := os.WriteFile(filepath.Join(dir, rule), []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, dash)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RulesDir, "old.yml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Diff(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(d, "\n")
	for _, w := range []string{rule + ": differs", dash + ": missing", RulesDir + "/old.yml: no source"} {
		if !strings.Contains(got, w) {
			t.Errorf("diff %q does not report %q", got, w)
		}
	}
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	if d, err := Diff(dir); err != nil || len(d) != 0 {
		t.Fatalf("after Write: %v %v", d, err)
	}
}
