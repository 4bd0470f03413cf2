package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Variable names. Hardware panels filter on hostname and gpu only, so they
// work on a stock dcgm-exporter's series; team and job come from
// gpuwatch_allocation_info.
const (
	varDatasource = "datasource"
	varHostname   = "hostname"
	varGPU        = "gpu"
	varTeam       = "team"
	varJob        = "job"
)

// Common selectors and joins. The info series is the "many" side of a join so
// that a shared GPU (one info series per holder) does not break it.
var (
	// hw selects one node's (or all nodes') GPUs.
	hw = fmt.Sprintf(`%s=~"$%s", %s=~"$%s"`, schema.LabelHostname, varHostname, schema.LabelGPU, varGPU)
	// onDevice joins an allocation to its device's series.
	onDevice = fmt.Sprintf("on (%s, %s, %s) group_left ()", schema.LabelHostname, schema.LabelUUID, schema.LabelGIID)
)

// sel is a selector of m with the given matchers.
func sel(m *schema.Metric, matchers string) string {
	if matchers == "" {
		return m.Name
	}
	return m.Name + "{" + matchers + "}"
}

// holders selects the allocations shown on a dashboard. Names are read from
// the catalogue when a dashboard is built, never earlier.
func holders() string {
	return fmt.Sprintf(`%s{%s=~"$%s", %s=~"$%s", %s=~"$%s"}`, schema.AllocationInfo.Name,
		schema.LabelHostname, varHostname, schema.LabelTeam, varTeam, schema.LabelJob, varJob)
}

// gpus selects metric m on the chosen nodes and GPUs, on gpuwatch's data and
// on dcgm-exporter 3.x's alike. The latter names the node label Hostname:
// its series are selected by that label and label_replace copies it into
// hostname, so aggregations by hostname and legends work on both.
func gpus(m *schema.Metric) string { return gpusFn(m, "%s") }

// gpusFn applies fn, a format with one %s for the selector (such as
// "rate(%s[$__rate_interval])"), to m on the chosen GPUs. A range function
// needs a plain selector inside it, so the union is taken over fn's results.
func gpusFn(m *schema.Metric, fn string) string {
	newer := fmt.Sprintf(fn, sel(m, fmt.Sprintf(`%s=~"$%s", %s="", %s=~"$%s"`,
		schema.LabelHostname, varHostname, schema.LabelOldHost, schema.LabelGPU, varGPU)))
	older := fmt.Sprintf(fn, sel(m, fmt.Sprintf(`%s=~"$%s", %s!="", %s=~"$%s"`,
		schema.LabelOldHost, varHostname, schema.LabelOldHost, schema.LabelGPU, varGPU)))
	return fmt.Sprintf(`(%s or %s)`, newer, copyOldHost(older))
}

// copyOldHost copies dcgm-exporter 3.x's Hostname label into hostname.
func copyOldHost(expr string) string {
	return fmt.Sprintf(`label_replace(%s, "%s", "$1", "%s", "(.+)")`, expr, schema.LabelHostname, schema.LabelOldHost)
}

// perHolder charges each holder of a device with the device's value of expr.
func perHolder(expr string) string {
	return fmt.Sprintf("%s * %s %s", holders(), onDevice, expr)
}

// orZero makes a per-GPU health query answer 0 for GPUs that have no series
// of that metric (no XID yet, a field the device lacks), so a table lists
// every GPU instead of leaving holes.
func orZero(expr string) string {
	return fmt.Sprintf("%s or on (%s, %s) (0 * max by (%s, %s) (%s))", expr,
		schema.LabelHostname, schema.LabelGPU, schema.LabelHostname, schema.LabelGPU, gpus(schema.GPUTemp))
}

func datasource() common.DataSourceRef {
	return common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${" + varDatasource + "}")}
}

// gpuLegend names a GPU series in a legend: the host always comes first.
const gpuLegend = "{{hostname}} GPU {{gpu}}"

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource()).Range()
}

func instant(expr string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).Datasource(datasource()).
		Instant().Format(prometheus.PromQueryFormatTable)
}

func refIDs(qs []*prometheus.DataqueryBuilder) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], len(qs))
	for i, q := range qs {
		out[i] = q.RefId(string(rune('A' + i)))
	}
	return out
}

func timeSeries(title, description, unit string, w uint32, qs ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource()).Targets(refIDs(qs)).Height(8).Span(w).
		FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).ShowLegend(true).Calcs([]string{"mean", "max", "lastNotNull"})).
		Tooltip(tooltip())
}

// tooltip shows every series at the cursor, highest first; the SDK would
// otherwise leave the mode empty.
func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}

// singleStat shows one number; the reduction is explicit because Grafana's
// default differs between versions.
func singleStat(title, description, unit string, q *prometheus.DataqueryBuilder) *stat.PanelBuilder {
	// A stat shows one number: its legend is the panel title.
	q = q.LegendFormat(title)
	return stat.NewPanelBuilder().Title(title).Description(description).Unit(unit).
		Datasource(datasource()).Targets(refIDs([]*prometheus.DataqueryBuilder{q})).Height(4).Span(4).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		GraphMode(common.BigValueGraphModeArea).ColorMode(common.BigValueColorModeValue).
		Orientation(common.VizOrientationAuto)
}

// tableOf merges instant queries into one row per series; each query becomes
// a column named after the query's header.
func tableOf(title, description string, w uint32, columns []string, qs ...*prometheus.DataqueryBuilder) *table.PanelBuilder {
	rename := map[string]string{}
	for i, c := range columns {
		rename["Value #"+string(rune('A'+i))] = c
	}
	if len(qs) == 1 {
		rename["Value"] = columns[0]
	}
	return table.NewPanelBuilder().Title(title).Description(description).
		Datasource(datasource()).Targets(refIDs(qs)).Height(8).Span(w).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true},
			"renameByName":  rename,
		}})
}

// finish gives every panel and row a unique id, in layout order (Grafana
// keys panel links and state on it), and makes the dashboard loadable by
// every supported Grafana version (see compatible).
func finish(d dashboard.Dashboard, err error) (dashboard.Dashboard, error) {
	if err != nil {
		return d, err
	}
	compatible(&d)
	id := uint32(1)
	for i := range d.Panels {
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			p.Panel.Id = cog.ToPtr(id)
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
		id++
	}
	return d, nil
}

func row(title string) *dashboard.RowBuilder {
	return dashboard.NewRowBuilder(title).Collapsed(false)
}

// newDashboard sets what every gpuwatch dashboard shares: uid, tags, time
// range, refresh and the five variables.
func newDashboard(uid, title, description string, singleHost bool) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).Uid(uid).Description(description).
		Tags([]string{"gpuwatch", "gpu"}).Editable().Time("now-6h", "now").Refresh("30s").
		Timezone("browser").Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("gpuwatch").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"gpuwatch"}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder(varDatasource).Label("Data source").Type("prometheus")).
		WithVariable(hostVariable(!singleHost)).
		WithVariable(gpuVariable()).
		WithVariable(labelVariable(varTeam, "Team", sel(schema.AllocationInfo, ""), schema.LabelTeam, true)).
		WithVariable(labelVariable(varJob, "Job", sel(schema.AllocationInfo, fmt.Sprintf(`%s=~"$%s"`, schema.LabelTeam, varTeam)), schema.LabelJob, true))
}

// labelVariable lists the values of label on series. Multi-value variables
// offer "All" as ".*", which also matches series without the label (a GPU
// nobody holds).
func labelVariable(name, label, series, labelName string, multi bool) *dashboard.QueryVariableBuilder {
	return variable(name, label, fmt.Sprintf("label_values(%s, %s)", series, labelName), "", sortAlphabetical, multi)
}

// hostVariable lists the nodes under either label, hostname or dcgm-exporter
// 3.x's Hostname: label_values reads one label only, so the names come from
// a query that copies Hostname into hostname.
func hostVariable(multi bool) *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("query_result(count by (%s) (%s))", schema.LabelHostname, copyOldHost(schema.GPUTemp.Name))
	return variable(varHostname, "Host", q, resultLabel(schema.LabelHostname), sortAlphabetical, multi)
}

// gpuVariable lists the GPUs of the chosen nodes, under either host label.
func gpuVariable() *dashboard.QueryVariableBuilder {
	q := fmt.Sprintf("query_result(count by (%s) (%s))", schema.LabelGPU, gpus(schema.GPUTemp))
	// The GPU filter of gpus() is the variable itself: leave it out here.
	q = strings.ReplaceAll(q, fmt.Sprintf(`, %s=~"$%s"`, schema.LabelGPU, varGPU), "")
	return variable(varGPU, "GPU", q, resultLabel(schema.LabelGPU), sortNumerical, true)
}

// resultLabel is the variable regex that takes a label's value from a
// query_result line such as {hostname="a100-01"} 8 1700000000000.
func resultLabel(label string) string {
	return fmt.Sprintf(`/%s="([^"]+)"/`, label)
}

func variable(name, label, q, regex string, sort dashboard.VariableSort, multi bool) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).Label(label).
		Query(dashboard.StringOrMap{String: cog.ToPtr(q)}).Definition(q).
		Datasource(datasource()).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(sort)
	if regex != "" {
		v = v.Regex(regex)
	}
	if multi {
		v = v.Multi(true).IncludeAll(true).AllValue(".*")
	}
	return v
}

// unitOf maps a catalogue unit to a Grafana unit id.
func unitOf(m *schema.Metric) string {
	switch strings.TrimSpace(m.Unit) {
	case "%":
		return "percent"
	case "MiB":
		return "mbytes"
	case "C":
		return "celsius"
	case "W":
		return "watt"
	case "MHz":
		return "rotmhz"
	case "bytes":
		return "bytes"
	case "bytes/s":
		return "Bps"
	case "ratio":
		return "percentunit"
	case "seconds":
		return "s"
	case "hours":
		return "h"
	}
	return "short"
}
