package engine

import (
	"fmt"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/fieldgen"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The borderline site (fieldgen.Borderline) in the two counter sets the
// table reports on: dcgm-exporter's default counters, and its profiling set
// with SM activity (dcp-metrics-included.csv).
var borderlineFormats = []struct {
	name string
	f    fieldgen.Format
}{
	{"default counters", fieldgen.Format{}},
	{"profiling counters with SM activity", fieldgen.Format{SM: true}},
}

// borderlineTable is the sensitivity table of one format of the
// borderline site.
type borderlineTable struct {
	name string
	rows []sensitivityRow
}

// borderlineSensitivity scores the borderline site in each format under
// every job's configuration, and checks that the defaults meet the
// acceptance on it.
func borderlineSensitivity(t *testing.T, jobs []sensitivityJob) []borderlineTable {
	t.Helper()
	var out []borderlineTable
	for _, bf := range borderlineFormats {
		site := fieldgen.Borderline().For(bf.f)
		db := fieldDB(t, site, bf.f)
		var defaults fieldScore // jobs[0] is the defaults
		rows := runSensitivity(t, db, fieldOrigin, fieldOrigin.Add(site.Span), jobs, func(i int, fs []finding.Finding) map[schema.Pattern]string {
			sc := scoreSite(site, fs)
			if i == 0 {
				defaults = sc
			}
			return fieldCells(sc)
		})
		checkSite(t, "borderline site, "+bf.name, defaults)
		out = append(out, borderlineTable{name: bf.name, rows: rows})
	}
	return out
}

// fieldCells is a field score as the table's cells: precision / recall
// per pattern, "–" where the pattern has neither label nor finding.
func fieldCells(s fieldScore) map[schema.Pattern]string {
	out := map[schema.Pattern]string{}
	for _, p := range schema.Patterns {
		n, l := s.findings[string(p)], s.patLabels[string(p)]
		if n == 0 && l == 0 {
			out[p] = "–"
			continue
		}
		prec, rec := 1.0, 1.0
		if n > 0 {
			prec = float64(s.backed[string(p)]) / float64(n)
		}
		if l > 0 {
			rec = float64(s.patFound[string(p)]) / float64(l)
		}
		out[p] = fmt.Sprintf("%.2f / %.2f", prec, rec)
	}
	return out
}
