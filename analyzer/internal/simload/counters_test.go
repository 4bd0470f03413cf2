package simload

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

// TestCounterSetsKeepEveryListedField: each field the dcgm-exporter files
// enable is in its set, or is one the catalogue does not publish, and the
// sets lack what those files lack.
func TestCounterSetsKeepEveryListedField(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fields  string
		set     []*schema.Metric
		has     []*schema.Metric
		hasNone []*schema.Metric
	}{
		{"default-counters.csv", dcgmDefaultFields, DCGMDefault,
			[]*schema.Metric{schema.GPUUtil, schema.PowerUsage, schema.FBUsed, schema.MemCopyUtil},
			[]*schema.Metric{schema.PowerLimit, schema.ProfSMActive, schema.ProfGrEngineActive, schema.ProfDRAMActive, schema.ProfTensorActive}},
		{"dcp-metrics-included.csv", dcgmDCPFields, DCGMDCP,
			[]*schema.Metric{schema.GPUUtil, schema.PowerUsage, schema.ProfGrEngineActive, schema.ProfDRAMActive, schema.ProfTensorActive},
			[]*schema.Metric{schema.PowerLimit, schema.ProfSMActive}},
	} {
		fields := strings.Fields(tc.fields)
		if len(fields) < 20 {
			t.Errorf("%s: %d fields", tc.name, len(fields))
		}
		for _, f := range fields {
			in := slices.ContainsFunc(tc.set, func(m *schema.Metric) bool { return m.Name == f })
			if !in && !slices.Contains(Unpublished, f) {
				t.Errorf("%s: %s neither kept nor known to be unpublished", tc.name, f)
			}
		}
		for _, m := range tc.set {
			if !slices.Contains(fields, m.Name) {
				t.Errorf("%s: set keeps %s, which the file does not list", tc.name, m.Name)
			}
		}
		for _, m := range tc.has {
			if !slices.Contains(tc.set, m) {
				t.Errorf("%s: %s missing", tc.name, m.Name)
			}
		}
		for _, m := range tc.hasNone {
			if slices.Contains(tc.set, m) {
				t.Errorf("%s: %s kept, the file has no such row", tc.name, m.Name)
			}
		}
	}
}
