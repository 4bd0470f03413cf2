// Package hourly defines the capacity planner's hourly figures once: the
// PromQL that computes each one from raw series for a clock hour, and the
// recording rule that stores it as the data arrives (Prometheus, Thanos
// Ruler or vmalert), so that a plan over a week reads 168 recorded points
// per holder instead of every raw sample of the week.
//
// Hours are half open: the figure at the hour boundary H covers the raw
// samples in [H-1h, H). A range of one hour ending 1 ms before H is
// (H-1h-1ms, H-1ms] on Prometheus 3.x, which with millisecond timestamps is
// [H-1h, H-1ms]; Prometheus 2.x closes the left edge too and would also take
// a sample stamped exactly H-1h-1ms. A pod that starts at 07:00 is in the
// hour 07:00-08:00 only.
//
// A recording rule is evaluated at times of its own (Prometheus offsets each
// group within its interval), not on the hour. Each rule therefore wraps its
// hourly expression in a one-hour subquery with a one-hour step, whose one
// step falls on the clock hour H at or before the evaluation time T (steps
// of a subquery are aligned to multiples of the step): evaluated anywhere in
// [H, H+1h), the rule stores the figure of [H-1h, H). The planner reads the
// sample the rule stored in [H, H+1h): see Lag.
package hourly

import (
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Source is where compute is read from.
type Source int

// Sources of compute.
const (
	// Both: SM activity where a holder has it, util elsewhere.
	Both Source = iota
	// SMOnly: SM activity alone.
	SMOnly
	// UtilOnly: GPU util alone (stock dcgm-exporter).
	UtilOnly
)

// SourceLabel marks the series whose compute is GPU util (a share of time)
// rather than SM activity. It is a label of the planner's own results and
// of its recorded series, never of an exporter's.
const SourceLabel = "planner_compute_source"

// Figure is one hourly figure per holder (a series of the raw metric: one
// device, one job).
type Figure int

// The hourly figures.
const (
	Mean    Figure = iota // mean compute
	P95                   // p95 compute
	Peak                  // highest compute
	Count                 // framebuffer samples (presence)
	MemPeak               // highest framebuffer used (MiB)
	Total                 // device memory, used + free (MiB), read at the boundary
	Figures = iota
)

// Interval is the evaluation interval of the recording rules: each
// evaluation stores the last whole hour.
const Interval = time.Hour

// Lag is how far after the hour boundary H a recorded figure of the hour
// [H-1h, H) is read: the rule stores it at its evaluation time in
// [H, H+1h), and a read at H+Lag over the hour before takes it.
const Lag = time.Hour

// Group is the name of the recording rules' group.
const Group = "gpuwatch-planner.rules"

// Record returns the recording rule's name of figure f (level:metric:operations;
// the level "holder" says that no label is aggregated away).
func Record(f Figure) string {
	switch f {
	case Mean:
		return "holder:gpuwatch_planner_compute:avg_1h"
	case P95:
		return "holder:gpuwatch_planner_compute:p95_1h"
	case Peak:
		return "holder:gpuwatch_planner_compute:max_1h"
	case Count:
		return "holder:" + schema.FBUsed.Name + ":count_1h"
	case MemPeak:
		return "holder:" + schema.FBUsed.Name + ":max_1h"
	case Total:
		return "holder:gpuwatch_planner_fb_total:last_1h"
	}
	panic(fmt.Sprintf("hourly: no figure %d", f))
}

// hour is the range of an hour ending just before the evaluation time.
const hour = "[1h] offset 1ms"

// Raw returns the expression of figure f over the raw series: evaluated at
// an hour boundary H, the figure of [H-1h, H). Compute is read from src.
func Raw(f Figure, src Source) string {
	compute := func(fn string) string {
		arg := ""
		if fn == "quantile_over_time" {
			arg = "0.95, "
		}
		sm := fn + "(" + arg + schema.ProfSMActive.Name + hour + ")"
		// Util is labelled so that the planner knows it reads a time share.
		util := "label_replace(" + fn + "(" + arg + schema.GPUUtil.Name + hour + ") / 100, \"" + SourceLabel + "\", \"util\", \"\", \"\")"
		switch src {
		case SMOnly:
			return sm
		case UtilOnly:
			return util
		}
		// `or` keeps util only for series that have no SM activity.
		return sm + " or ignoring(" + SourceLabel + ") " + util
	}
	switch f {
	case Mean:
		return compute("avg_over_time")
	case P95:
		return compute("quantile_over_time")
	case Peak:
		return compute("max_over_time")
	case Count:
		return "count_over_time(" + schema.FBUsed.Name + hour + ")"
	case MemPeak:
		return "max_over_time(" + schema.FBUsed.Name + hour + ")"
	case Total:
		// Used + free at any instant is the device's memory: one reading
		// at the hour boundary is enough, and spares a pass over every
		// sample of free memory.
		return schema.FBUsed.Name + " + " + schema.FBFree.Name
	}
	panic(fmt.Sprintf("hourly: no figure %d", f))
}

// Rule returns the recording rule's expression of figure f: evaluated at any
// time in [H, H+1h), the figure of [H-1h, H). It reads SM activity where a
// holder has it and util elsewhere, as the planner would on a mixed fleet.
func Rule(f Figure) string {
	return "last_over_time((" + Raw(f, Both) + ")[1h:1h])"
}

// Recorded returns the planner's read of the recorded figure f: evaluated at
// H+Lag, the figure of [H-1h, H).
func Recorded(f Figure) string {
	return "last_over_time(" + Record(f) + hour + ")"
}
