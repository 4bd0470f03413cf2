package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// JSON writes the plan as one JSON object.
func JSON(w io.Writer, p *Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(p); err != nil {
		return fmt.Errorf("write plan json: %w", err)
	}
	return nil
}

// Headline is the one-line summary every surface shows, with its window
// and coverage.
func (p *Plan) Headline() string {
	return fmt.Sprintf("%s to %s (%d h, coverage %.0f %%): %d GPUs held, %d needed, %d could be freed (%d of unknown demand kept)",
		p.From.UTC().Format(time.RFC3339), p.To.UTC().Format(time.RFC3339), p.Hours, 100*p.Coverage,
		p.Held, p.Needed, p.Freeable, p.Unknown)
}

// Table writes the plan for people: the headline, pools, per-GPU layouts,
// batch windows and reservations, teams and allocations.
func Table(w io.Writer, p *Plan) error {
	fmt.Fprintf(w, "Capacity plan %s\n", p.Headline())
	// Each line only when it has something to say: no sentence printed half.
	if p.ReadReason != "" {
		fmt.Fprintf(w, "Read from %s: %s\n", p.Read, p.ReadReason)
	} else {
		fmt.Fprintf(w, "Read from %s\n", p.Read)
	}
	if len(p.PoolsBy) > 0 {
		fmt.Fprintf(w, "Pools by %s\n", strings.Join(p.PoolsBy, "; "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t") }
	row("POOL", "SEEN", "HELD", "NEEDED", "FREEABLE", "UNKNOWN", "STRATEGY", "TIME_SLICE", "MIG", "P95_LOAD", "COVERAGE")
	for _, pl := range p.Pools {
		row(pl.Name, itoa(pl.Seen), itoa(pl.Held), itoa(pl.Needed), itoa(pl.Freeable), itoa(pl.Unknown), pl.Strategy,
			itoa(pl.TimeSliceGPUs), itoa(pl.MIGGPUs), pct(pl.Contention), pct(pl.Coverage))
	}
	tw.Flush()
	for _, pl := range p.Pools {
		fmt.Fprintf(w, "\nPool %s: layout of the %d GPUs needed\n", pl.Name, len(pl.Layout))
		if pl.Tradeoff != "" {
			fmt.Fprintf(w, "Slicing: %s\n", pl.Tradeoff)
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		row("GPU", "MODE", "LAYOUT", "ISOLATION", "P95_LOAD", "CONTENDED_H", "JOBS")
		for i, g := range pl.Layout {
			var lay []string
			for _, in := range g.Layout {
				lay = append(lay, in.Profile+"@"+itoa(in.Start))
			}
			if g.Mode != "mig" {
				lay = []string{"whole GPU, shared by " + itoa(len(g.Jobs))}
			}
			row(itoa(i), g.Mode, dash(strings.Join(lay, " ")), dash(g.Isolation), pct(g.P95Load), itoa(g.ContendedHours), jobs(g.Jobs))
		}
		tw.Flush()
		if pl.Heat != nil {
			for _, win := range pl.Heat.Windows {
				fmt.Fprintf(w, "Batch window: %s of %d %s\n", win, pl.Heat.GPUs, pl.Model)
			}
		}
		forecastLines(w, p, &pl)
	}
	teamsTable(w, p)
	fmt.Fprintln(w, "\nAllocations")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row("POOL", "HOST", "JOB", "TEAM", "GPUS", "COMPUTE_P50", "P95", "PEAK", "MEM_P50_GIB", "P95", "PEAK", "RECOMMENDATION")
	for _, a := range p.Allocations {
		rec := a.Recommendation
		switch {
		case a.Profile != "":
			rec += " " + a.Profile
		case a.SmallerModel != "":
			rec += " " + a.SmallerModel
		}
		row(a.Pool, a.Host, a.Job, dash(a.Team), itoa(a.GPUs), pct(a.Compute.P50), pct(a.Compute.P95), pct(a.Compute.Peak),
			gib(a.Memory.P50), gib(a.Memory.P95), gib(a.Memory.Peak), rec)
	}
	return tw.Flush()
}

// forecastLines writes a pool's demand and memory forecasts, or why it has
// none.
func forecastLines(w io.Writer, p *Plan, pl *Pool) {
	if pl.Forecast == nil && p.HistoryHours < HoursOfWeek {
		fmt.Fprintf(w, "Demand forecast: none, it needs a week of history and the data reaches back %d h\n", p.HistoryHours)
	}
	if f := pl.Forecast; f != nil {
		fmt.Fprintf(w, "Demand forecast (%s, GPU-equivalents of %s, from %d week(s)): weekday level %.1f", f.Method, f.Measure, f.Weeks, f.WeekdayLevel)
		switch {
		case f.Backtest != nil:
			fmt.Fprintf(w, "; backtest over %d weeks, MAPE %.1f %% (Holt-Winters %.1f %%, seasonal naive %.1f %%)", f.Backtest.Folds,
				100*min(f.Backtest.HoltWinters, f.Backtest.Naive), 100*f.Backtest.HoltWinters, 100*f.Backtest.Naive)
		case f.NaiveMAPE > 0:
			fmt.Fprintf(w, "; last week from the one before, MAPE %.1f %%", 100*f.NaiveMAPE)
		default:
			fmt.Fprintf(w, "; no backtest (one week of history)")
		}
		fmt.Fprintln(w)
		for _, r := range f.Reserve {
			fmt.Fprintf(w, "Peak: %s\n", r)
		}
		if m := f.Memory; m != nil {
			fmt.Fprintf(w, "Memory forecast (%s, GiB of framebuffer used at once): weekday level %.0f GiB\n", m.Method, m.WeekdayLevel)
			for _, p := range m.Peaks {
				fmt.Fprintf(w, "Memory peak: %s\n", p)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 0, 64) + "%" }

func num(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func gib(mib float64) string { return strconv.FormatFloat(mib/1024, 'f', 1, 64) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func jobs(ids []string) string {
	if len(ids) > 6 {
		return strings.Join(ids[:6], ",") + fmt.Sprintf(",… (%d)", len(ids))
	}
	return strings.Join(ids, ",")
}

// teamsTable writes the pooling view: each team's GPUs, and its GPU-hours
// where the plan was given the analyzer's accounting.
func teamsTable(w io.Writer, p *Plan) {
	fmt.Fprintf(w, "\nTeams (unallocated capacity %.0f GPU-hours)\n", p.UnallocatedGPUHours)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t") }
	row("TEAM", "ALLOCATED_GPU_H", "USED_GPU_H", "WASTED_GPU_H", "HELD", "NEEDED", "FREEABLE")
	accounted := false
	for _, t := range p.Teams {
		alloc, used, wasted := "-", "-", "-"
		if t.GPUHours != nil {
			accounted = true
			alloc, used, wasted = num(t.GPUHours.Allocated), num(t.GPUHours.Used), num(t.GPUHours.Wasted)
		}
		row(t.Team, alloc, used, wasted, itoa(t.Held), itoa(t.Needed), itoa(t.Freeable))
	}
	tw.Flush()
	for _, t := range p.Teams {
		if s := t.SharedGPUHours; s != nil {
			fmt.Fprintf(w, "Shared GPUs: team %s held %s GPU-hours as shares of shared GPUs, used %s, wasted %s (each holder judged on its own use)\n",
				t.Team, num(s.Allocated), num(s.Used), num(s.Wasted))
		}
	}
	if !accounted && len(p.Teams) > 0 {
		fmt.Fprintln(w, "GPU-hours: the analyzer's accounting (docs/accounting.md), which `gpuwatch analyze` over the window, the reports and the web page show; the planner judges no waste itself.")
	}
}
