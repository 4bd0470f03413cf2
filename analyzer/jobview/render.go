package jobview

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/pagestyle"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

// JSON writes the report as indented JSON (docs/job.md describes it).
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

var bars = []rune("▁▂▃▄▅▆▇█")

// Sparkline draws values scaled to top (a blank for a missing value).
func Sparkline(vals []*float64, top float64) string {
	var b strings.Builder
	for _, v := range vals {
		if v == nil {
			b.WriteRune(' ')
			continue
		}
		i := 0
		if top > 0 {
			i = int(math.Round(*v / top * float64(len(bars)-1)))
		}
		b.WriteRune(bars[min(max(i, 0), len(bars)-1)])
	}
	return b.String()
}

func opt(v *float64, format string) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// Text writes the report for a terminal: the job, a line per GPU with
// sparklines of utilization and memory, the CPU, the findings and advice.
// Values come from the cluster's users and schedulers: they are written
// through Clean, so a job name cannot drive the terminal.
func Text(w io.Writer, r *Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("Job %s (%s) on %s\n", termsafe.String(r.Job), termsafe.String(r.Scheduler), termsafe.String(dash(r.Hostname)))
	p("  user %s  team %s  account %s  name %s  kind %s\n", termsafe.String(dash(r.User)), termsafe.String(dash(r.Team)), termsafe.String(dash(r.Account)), termsafe.String(dash(r.JobName)), termsafe.String(dash(r.Kind)))
	p("  state %s  %s → %s (%s)  %d GPU(s) %s\n", termsafe.String(r.State), ts(r.Start), ts(r.End), hm(r.DurationHours), len(r.GPUs), termsafe.String(strings.Join(r.Models, ", ")))
	if r.Note != "" {
		p("  note: %s\n", termsafe.String(r.Note))
	}
	if r.NotEnoughData != "" {
		p("\nNOT ENOUGH DATA: %s\n", termsafe.String(r.NotEnoughData))
	}
	if h := r.Health; h != nil && h.EndedByFault != "" {
		p("\nENDED BY A GPU FAULT: %s\n", termsafe.String(h.EndedByFault))
	}
	p("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tUTIL MEAN\tPEAK\tSM MEAN\tMEM PEAK\tSHARE\tPOWER\tENERGY\tUTIL\tMEMORY")
	for _, g := range r.GPUs {
		name := g.Index
		if name == "" {
			name = g.Device
		}
		if g.MIGProfile != "" {
			name += " " + g.MIGProfile
		}
		var memTop float64
		if g.MemTotalMiB != nil {
			memTop = *g.MemTotalMiB
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termsafe.String(name), opt(g.UtilMean, "%.1f%%"), opt(g.UtilPeak, "%.0f%%"),
			opt(g.SMActiveMean, "%.2f"), opt(mib(g.MemPeakMiB), "%.1f GiB"), opt(pct(g.MemPeakShare), "%.0f%%"),
			opt(g.PowerMeanW, "%.0f W"), opt(g.EnergyKWh, "%.2f kWh"), Sparkline(g.SparkUtil, 100), Sparkline(g.SparkMem, memTop))
	}
	tw.Flush()
	if r.CPU != nil {
		p("\nCPU: %.0f core-seconds, %.2f cores on average", r.CPU.Seconds, r.CPU.MeanCores)
		if r.CPU.Efficiency != nil {
			p(" of %d allocated (efficiency %.0f%%)", r.CPU.Allocated, 100**r.CPU.Efficiency)
		}
		p("\n")
	}
	p("\nTotals: %.2f GPU-hours allocated, %.2f wasted, %.2f kWh", r.Totals.GPUHours, r.Totals.WastedGPUHours, r.Totals.EnergyKWh)
	if r.Totals.DegradedGPUHours > 0 {
		p("; %.2f degraded (slowed by its GPUs, not waste)", r.Totals.DegradedGPUHours)
	}
	p("\n")
	writeTenants(&b, r.Tenants)
	if h := r.Health; h != nil {
		for _, s := range h.Missing {
			p("Health signal missing: %s (%s): %s\n", termsafe.String(s.Name), termsafe.String(s.Metrics), termsafe.String(s.Without))
		}
	}
	if len(r.Findings) == 0 {
		p("\nNo waste found.\n")
	}
	for _, f := range r.Findings {
		p("\n%s (%s): %.2f GPU-hours, %s → %s\n", termsafe.String(string(f.Pattern)), termsafe.String(string(f.Severity)), f.WastedGPUHours, ts(f.Start), ts(f.End))
		if f.Detail != "" {
			p("  %s\n", termsafe.String(f.Detail))
		}
		if f.Advice != "" && f.Advice != f.Detail {
			p("  advice: %s\n", termsafe.String(f.Advice))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTenants writes the holders of the job's shared GPUs, when it
// shared them: a line each, with its share and what it made of it.
func writeTenants(b *strings.Builder, tenants []Tenant) {
	if len(tenants) == 0 {
		return
	}
	fmt.Fprintf(b, "\nShared GPU: %d holders in the job's window (the GPU figures above are the device's, every holder's use together)\n", len(tenants))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  HOLDER\tUSER\tSHARE\tGPU-H\tUSED\tWASTED")
	for _, t := range tenants {
		name := termsafe.String(t.Job)
		if t.Self {
			name += " (this job)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%.0f%%\t%.2f\t%.2f\t%.2f\n", name, termsafe.String(dash(t.User)), t.SharePercent(), t.GPUHours, t.UsedGPUHours, t.WastedGPUHours)
	}
	tw.Flush()
}

//go:embed templates/job.html
var templates embed.FS

var page = template.Must(template.New("job.html").Funcs(template.FuncMap{
	"opt": opt, "mib": mib, "pct": pct, "ts": ts, "hm": hm, "svg": svgSpark, "pagestyle": pagestyle.CSS,
}).ParseFS(templates, "templates/job.html"))

// HTML writes the report as a standalone page.
func HTML(w io.Writer, r *Report) error { return page.Execute(w, r) }

// svgSpark draws a sparkline as an inline SVG polyline scaled to the
// series' own range, with that range written beside it: utilisation that
// moves between 10 and 14 % shows its variation (on a 0..100 scale it was a
// flat line). A series that does not vary is drawn flat at mid height and
// says so. Values are divided by div for the label (1024: MiB as GiB).
func svgSpark(vals []*float64, unit string, div float64) template.HTML {
	const wpx, hpx, pad = 160.0, 24.0, 2.0
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, v := range vals {
		if v != nil {
			lo, hi, n = math.Min(lo, *v), math.Max(hi, *v), n+1
		}
	}
	if n == 0 || div <= 0 {
		return ""
	}
	flat := hi-lo <= 1e-9*math.Max(1, math.Abs(hi))
	var pts []string
	for i, v := range vals {
		if v == nil {
			continue
		}
		x := wpx * float64(i) / math.Max(1, float64(len(vals)-1))
		y := hpx / 2
		if !flat {
			y = pad + (hpx-2*pad)*(hi-*v)/(hi-lo)
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	label := fmt.Sprintf("%s–%s %s", sparkNum(lo/div), sparkNum(hi/div), unit)
	if flat {
		label = fmt.Sprintf("flat at %s %s", sparkNum(lo/div), unit)
	}
	return template.HTML(fmt.Sprintf(`<span class="spark"><svg width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f"><polyline fill="none" stroke="#2563eb" stroke-width="1.5" points="%s"/></svg> <small class="muted">%s</small></span>`,
		wpx, hpx, wpx, hpx, strings.Join(pts, " "), template.HTMLEscapeString(label))) //nolint:gosec // numbers and a fixed unit only
}

// sparkNum writes a sparkline's bound: whole numbers from 10 up, one
// decimal below.
func sparkNum(v float64) string {
	if math.Abs(v) >= 10 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func mib(v *float64) *float64 {
	if v == nil {
		return nil
	}
	g := *v / 1024
	return &g
}

func pct(v *float64) *float64 {
	if v == nil {
		return nil
	}
	p := *v * 100
	return &p
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func hm(h float64) string {
	d := time.Duration(h * float64(time.Hour)).Round(time.Second)
	return d.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
