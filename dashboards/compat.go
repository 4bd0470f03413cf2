package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// Supported Grafana versions. The dashboards are written in the JSON schema of
// the oldest (SchemaVersion is what Grafana 10.4's migrator writes), so every
// version from it on loads them without migration surprises; newer versions
// migrate them up on load.
const (
	OldestGrafana = "10.4"
	SchemaVersion = 39
)

// Variable sort orders that exist in every supported version (natural sort
// came later).
const (
	sortAlphabetical = dashboard.VariableSortAlphabeticalAsc
	sortNumerical    = dashboard.VariableSortNumericalAsc
)

// compatible drops what the SDK writes for newer Grafana versions than
// OldestGrafana: the schema version, the link placement (a Grafana 12
// option) and allowCustomValue on variables (Grafana 11).
func compatible(d *dashboard.Dashboard) {
	d.SchemaVersion = SchemaVersion
	for i := range d.Links {
		d.Links[i].Placement = nil
	}
	if d.Templating.List == nil {
		return
	}
	for i := range d.Templating.List {
		d.Templating.List[i].AllowCustomValue = nil
	}
}
