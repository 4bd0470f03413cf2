// Package cataloguetest helps tests prove that generated files take every
// metric name from the catalogue: it renames every catalogue metric for the
// length of a test, so a name spelled as a literal somewhere stays behind in
// the output while the catalogue's names change.
package cataloguetest

import (
	"regexp"
	"sort"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

// renamedPrefix starts every renamed metric name.
const renamedPrefix = "renamed_"

// RenameAll renames every catalogue metric to renamed_<name> until the test
// ends, and returns the original names. Tests that call it must not run in
// parallel with others reading the catalogue.
func RenameAll(t testing.TB) []string {
	t.Helper()
	var names []string
	for _, m := range schema.All() {
		names = append(names, m.Name)
		m.Name = renamedPrefix + m.Name
	}
	t.Cleanup(func() {
		for i, m := range schema.All() {
			m.Name = names[i]
		}
	})
	return names
}

// Literals returns the names of originals that occur in data as whole words
// not preceded by the renamed prefix: names spelled as literals where the
// catalogue should have been read.
func Literals(data []byte, originals []string) []string {
	var out []string
	for _, n := range originals {
		re := regexp.MustCompile(`(^|[^A-Za-z0-9_:])` + regexp.QuoteMeta(n) + `($|[^A-Za-z0-9_])`)
		if re.Match(data) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
