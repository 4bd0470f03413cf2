package rules

import (
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
)

// plannerGroup is the capacity planner's hourly figures per holder (one
// device, one job), from package hourly, which the planner reads instead of
// the raw series when they cover its window. Each evaluation stores the
// last whole clock hour, so the group runs once an hour; it reads each raw
// sample once per figure as the data arrives, and a plan over a week then
// reads 168 points per holder. Consumer: `gpuwatch plan`, the Planner tab,
// the reports' capacity plan and the planner metrics.
func plannerGroup() Group {
	g := Group{Name: hourly.Group, Interval: model.Duration(hourly.Interval).String()}
	comments := map[hourly.Figure]string{
		hourly.Mean: "Capacity planner: the hourly figures per holder (device and job) of the last\n" +
			"whole clock hour [H-1h, H), whenever in [H, H+1h) the group runs: the\n" +
			"one-hour subquery's single step falls on H. Compute is SM activity, or\n" +
			"GPU util / 100 (labelled " + hourly.SourceLabel + "=\"util\") where a holder has\n" +
			"no SM activity. Mean compute of the hour.",
		hourly.P95:     "p95 compute of the hour.",
		hourly.Peak:    "Highest compute of the hour.",
		hourly.Count:   "Framebuffer samples of the hour: presence.",
		hourly.MemPeak: "Highest framebuffer used of the hour (MiB).",
		hourly.Total:   "Device memory (used + free, MiB) at the hour's end.",
	}
	for f := hourly.Figure(0); f < hourly.Figures; f++ {
		g.Rules = append(g.Rules, Rule{Record: hourly.Record(f), Expr: hourly.Rule(f), Comment: comments[f]})
	}
	return g
}
