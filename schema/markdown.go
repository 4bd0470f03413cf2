package schema

import (
	"fmt"
	"strings"
)

// Markdown renders the metrics reference (README.md and docs/metrics.md
// embed it between markers; a test keeps them in step with the catalogue).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| metric | type | unit | extra labels | source | description |\n|---|---|---|---|---|---|\n")
	for _, m := range all {
		labels := strings.Join(m.Labels, ", ")
		if m.PerGPU {
			if labels != "" {
				labels = "GPU labels, " + labels
			} else {
				labels = "GPU labels"
			}
		}
		unit := m.Unit
		if unit == "" {
			unit = "–"
		}
		if labels == "" {
			labels = "–"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", m.Name, m.Type, unit, labels, m.Origin, strings.ReplaceAll(m.Help, "|", `\|`))
	}
	b.WriteString("\nGPU labels: `" + strings.Join(GPULabels, "`, `") + "` (gpuwatch_* series leave out the camelCase `modelName`, " +
		"so they pass `promtool check metrics` without exception; join on `hostname` and `gpu`); on MIG instances also `" +
		LabelGIProfile + "` and `" + LabelGIID + "`; while allocated `" + strings.Join(AllocationLabels, "`, `") + "`.\n")
	return b.String()
}
