package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/gpuwatch/gpuwatch/rules"
	c "github.com/gpuwatch/gpuwatch/schema"
)

// special lists the per-GPU metrics that have their own panels on the node
// dashboard instead of a generic one.
var special = map[*c.Metric]bool{
	c.ClockEvents: true, c.ClockEventActive: true, c.XIDErrors: true, c.XIDLast: true,
	c.ProcessMemory: true, c.AllocationInfo: true, c.ProcessOrphaned: true, c.Capabilities: true,
}

// Node shows one node's GPUs in detail: every per-GPU metric of the
// catalogue, the clock-event reasons as a state timeline, per-process memory
// and the XID history.
func Node() (dashboard.Dashboard, error) {
	b := newDashboard("gpuwatch-node", "gpuwatch / Node and GPU detail",
		"Every metric of the selected GPUs of one node, clock-event reasons, processes and XIDs.", true).
		WithRow(row("Clock-event reasons")).
		WithPanel(timeline("Clock-event reasons", fmt.Sprintf("One lane per active reason (%s).", c.ClockEventActive.Name),
			query(fmt.Sprintf("%s == 1", gpus(c.ClockEventActive)), gpuLegend+" {{reason}}"))).
		WithPanel(timeline("Clock-event reasons (from the bitmask)", fmt.Sprintf("The same reasons decoded from %s, so it also works on dcgm-exporter's data: bit n is floor(x / 2^n) %% 2.", c.ClockEvents.Name),
			bitQueries()...)).
		WithRow(row("Processes and XIDs")).
		WithPanel(timeSeries("GPU memory per process", "Memory each process holds on the GPU, with its command, user and job.", "bytes", 12,
			query(gpus(c.ProcessMemory), gpuLegend+" pid {{pid}} {{command}} {{user}} {{job_id}}"))).
		WithPanel(timeSeries("XID errors", fmt.Sprintf("XID errors per second by code (rate of %s), and the last XID (%s, dcgm-exporter).", c.XIDErrors.Name, c.XIDLast.Name), "short", 12,
			query(gpusFn(c.XIDErrors, "rate(%s[$__rate_interval])"), gpuLegend+" XID {{xid}}"),
			query(gpus(c.XIDLast), gpuLegend+" last XID"))).
		WithPanel(tableOf("XID history", "XIDs per GPU and code over the dashboard's time range.", 24, []string{"XIDs in range"},
			instant(fmt.Sprintf("sum by (hostname, gpu, xid) (%s)", gpusFn(c.XIDErrors, "increase(%s[$__range])"))))).
		WithRow(row("Every metric"))
	for _, m := range c.All() {
		if !m.PerGPU || special[m] || (m.Origin != c.OriginNVML && m.Origin != c.OriginGPM) {
			continue
		}
		b = b.WithPanel(metricPanel(m))
	}
	return finish(b.Build())
}

// metricPanel plots one catalogue metric per GPU. Counters are plotted as
// rates, since a raw total says nothing about now: energy as watts, violation
// time as the share of time throttled, error counters as events per second.
func metricPanel(m *c.Metric) *timeseries.PanelBuilder {
	expr, unit := gpus(m), unitOf(m)
	title := m.Name
	if m.Type == c.Counter {
		rate := gpusFn(m, "rate(%s[$__rate_interval])")
		switch m.Unit {
		case "mJ":
			expr, unit = rate+" / 1000", "watt"
		case "ns":
			expr, unit = rate+" / 1e9", "percentunit"
		default:
			expr, unit = rate, "cps"
		}
		title = "rate(" + m.Name + ")"
	}
	legend := gpuLegend
	for _, l := range m.Labels {
		legend += " {{" + l + "}}"
	}
	return timeSeries(title, m.Help, unit, 8, query(expr, legend))
}

func bitQueries() []*prometheus.DataqueryBuilder {
	var qs []*prometheus.DataqueryBuilder
	for _, r := range c.ClockEventReasons {
		qs = append(qs, query(rules.ClockBit(gpus(c.ClockEvents), r.Name), gpuLegend+" "+r.Name))
	}
	return qs
}

func timeline(title, description string, qs ...*prometheus.DataqueryBuilder) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().Title(title).Description(description).
		Datasource(datasource()).Targets(refIDs(qs)).Height(9).Span(12).
		ShowValue(common.VisibilityModeNever).MergeValues(true).Tooltip(tooltip()).
		Mappings([]dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{
			Type: dashboard.MappingTypeValueToText,
			Options: map[string]dashboard.ValueMappingResult{
				"0": {Text: cog.ToPtr("inactive"), Color: cog.ToPtr("transparent")},
				"1": {Text: cog.ToPtr("active"), Color: cog.ToPtr("orange")},
			},
		}}})
}
