package docs

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/schema"
)

// queryTable renders the analyzer's per-cycle queries for a 5-minute step.
func queryTable() string {
	var b strings.Builder
	b.WriteString("| # | PromQL (for a 5 m step) |\n|---|---|\n")
	for i, e := range features.Exprs(5 * time.Minute) {
		fmt.Fprintf(&b, "| %d | `%s` |\n", i+1, e)
	}
	return b.String()
}

var generatedRE = regexp.MustCompile(`(?s)(<!-- queries: generated [^\n]*-->\n)(.*?)(<!-- end queries -->)`)

// TestScalingQueries keeps scaling.md's list of queries the one the code
// issues.
func TestScalingQueries(t *testing.T) {
	const path = "scaling.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := generatedRE.FindSubmatchIndex(b)
	if m == nil {
		t.Fatalf("%s: no generated query table", path)
	}
	if got := string(b[m[4]:m[5]]); got == queryTable() {
		return
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		out := string(b[:m[4]]) + queryTable() + string(b[m[5]:])
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: the query table is out of date; run UPDATE_DOCS=1 go test ./docs", path)
}

// The figures the docs derive from the number of queries per cycle.
var queryFigures = []*regexp.Regexp{
	regexp.MustCompile(`(\d+)\*{0,2} (?:fleet-wide )?range queries`),
	regexp.MustCompile(`touches (\d+) × 1,000 × 20`),
	regexp.MustCompile(`(\d+) queries \(independent of fleet size`),
}

// TestQueryCountInDocs: every place the docs state how many queries a
// cycle asks says what features.Queries says.
func TestQueryCountInDocs(t *testing.T) {
	for _, path := range []string{"architecture.md", "scaling.md", "performance.md", "../README.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range queryFigures {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				if n, _ := strconv.Atoi(m[1]); n != features.Queries {
					t.Errorf("%s: %q, but a cycle asks %d queries", path, m[0], features.Queries)
				}
			}
		}
		want := strconv.Itoa(features.Queries) + ",000 points"
		if strings.Contains(string(b), "returns ") && regexp.MustCompile(`returns [\d,]+ points`).MatchString(string(b)) &&
			!strings.Contains(string(b), "returns "+want) {
			t.Errorf("%s: the points per cycle should read %q", path, want)
		}
	}
}

// TestAccountingDocumented: accounting.md names every figure of the
// accounting, by its JSON key and by its /metrics measure.
func TestAccountingDocumented(t *testing.T) {
	b, err := os.ReadFile("accounting.md")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	ty := reflect.TypeOf(accounting.Totals{})
	for i := 0; i < ty.NumField(); i++ {
		want = append(want, "`"+strings.Split(ty.Field(i).Tag.Get("json"), ",")[0]+"`")
	}
	want = append(want, "`"+schema.AnalyzerAccountedGPUSeconds.Name+"{"+schema.LabelMeasure+"}`")
	for _, m := range []string{schema.MeasureAllocated, schema.MeasureUsed, schema.MeasureWasted, schema.MeasureOverLimit, schema.MeasureDegraded, schema.MeasureOrphan} {
		want = append(want, "| "+strings.ReplaceAll(strings.ReplaceAll(m, "over_limit", "over the limit"), "orphan", "orphaned")+" |")
	}
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("accounting.md does not name %s", w)
		}
	}
}
