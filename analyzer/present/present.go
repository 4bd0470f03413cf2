// Package present turns findings into what `gpuwatch analyze` prints: one
// JSON object for machines, an aligned table with totals for people; and
// parses the window flags (RFC 3339 or relative times).
package present

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
	"github.com/gpuwatch/gpuwatch/schema"
)

// ParseTime reads "now", a relative time ("-7d", "-90m", "now-2h") or an
// RFC 3339 timestamp.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "" || s == "now":
		return now, nil
	case strings.HasPrefix(s, "now-"):
		s = s[len("now"):]
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		d, err := model.ParseDuration(rest)
		if err != nil {
			return time.Time{}, fmt.Errorf("relative time %q: %w", s, err)
		}
		return now.Add(-time.Duration(d)), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: want RFC 3339 (2026-01-02T15:04:05Z), now, or relative like -7d", s)
	}
	return t, nil
}

// JSON writes {"findings": [...], "coverage": {...}, "accounting": {...}};
// an empty result is an empty list, not null, and coverage and accounting
// are left out when nil.
func JSON(w io.Writer, fs []finding.Finding, cov *engine.Coverage, book *accounting.Book) error {
	if fs == nil {
		fs = []finding.Finding{}
	}
	var totals *accounting.Totals
	if book != nil {
		totals = &book.Totals
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		Findings   []finding.Finding  `json:"findings"`
		Coverage   *engine.Coverage   `json:"coverage,omitempty"`
		Accounting *accounting.Totals `json:"accounting,omitempty"`
	}{fs, cov, totals}); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// Table writes findings sorted by GPU-hours wasted, aligned, each with its
// own figure; then, when book is set, the window's waste per pattern and
// its GPU-hours as the accounting package counts them (clipped to the
// window, waste at most what was allocated, over-limit and orphaned hours
// apart); then what the data covered and, when nothing was found, why
// (cov may be nil).
func Table(w io.Writer, fs []finding.Finding, cov *engine.Coverage, book *accounting.Book) error {
	sorted := append([]finding.Finding(nil), fs...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if sorted[i].WastedGPUHours != sorted[j].WastedGPUHours {
			return sorted[i].WastedGPUHours > sorted[j].WastedGPUHours
		}
		return sorted[i].Key() < sorted[j].Key()
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// Job names, users and hosts are others' text: escaped, so that none
	// can move the cursor, clear the screen or forge a row or column.
	row := func(cols ...string) {
		for i, c := range cols {
			cols[i] = termsafe.String(c)
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	row("WASTED_GPU_H", "PATTERN", "SEVERITY", "ACTION", "JOB", "USER", "TEAM", "KIND", "HOST", "GPUS", "START", "END")
	for _, f := range sorted {
		row(num(f.WastedGPUHours), string(f.Pattern), string(f.Severity), string(f.Action), f.Job, dash(f.User), dash(f.Team),
			kindCell(&f), f.Hostname, strconv.Itoa(len(f.GPUs)), f.Start.UTC().Format(time.RFC3339), f.End.UTC().Format(time.RFC3339))
	}
	if book != nil {
		row()
		totals := map[schema.Pattern]float64{}
		counts := map[schema.Pattern]int{}
		for _, e := range book.Entries {
			p := e.Finding.Pattern
			totals[p] += e.Wasted + e.Orphan + e.OverLimit
			counts[p]++
		}
		for _, p := range schema.Patterns {
			if counts[p] == 0 {
				continue
			}
			note := fmt.Sprintf("%d findings", counts[p])
			switch p {
			case schema.Overlong:
				note += ", over the limit (not waste)"
			case schema.OrphanProcess:
				note += ", orphaned (outside allocated)"
			}
			row(num(totals[p]), string(p), note)
		}
		row(num(book.Wasted), "TOTAL", fmt.Sprintf("%d findings", len(sorted)))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	var tail []string
	if book != nil {
		tail = append(tail, book.Totals.Line()+".")
	}
	if cov != nil {
		tail = append(tail, CoverageLine(*cov))
		tail = append(tail, FloorLines(cov.IdleFloors)...)
		tail = append(tail, ExporterLines(cov.Exporters)...)
		tail = append(tail, ShareLines(cov.Shares)...)
	}
	for _, l := range tail {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	return nil
}

// CoverageLine says in one sentence what an analysis saw and, when it found
// nothing, why.
func CoverageLine(c engine.Coverage) string {
	s := fmt.Sprintf("Saw %d GPUs and %d allocations over %s; %.1f%% of GPU-steps had data.",
		c.GPUs, c.Allocations, c.To.Sub(c.From), 100*c.Ratio)
	if c.Reason != "" {
		s += " No findings: " + c.Reason + "."
	}
	return s
}

// FloorLines says, per GPU model, which idle floor of power judged it (the
// power veto on idle, the hang's spin signature): learnt from the fleet,
// and from how much, or the published figure, and why.
func FloorLines(fs []detect.IdleFloor) []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		var s string
		switch {
		case f.Learned:
			s = fmt.Sprintf("Idle floor of %s: %.0f W, learnt from %d idle steps of %d GPUs.", f.Model, f.Watts, f.Samples, f.GPUs)
		case f.Watts > 0:
			s = fmt.Sprintf("Idle floor of %s: %.0f W, published (analyzer/gpumodel): %d idle steps seen, %d needed to learn it.",
				f.Model, f.Watts, f.Samples, f.Needed)
		default:
			s = fmt.Sprintf("Idle floor of %s: none (a model the table does not know, %d idle steps of %d needed): power judged nothing on it.",
				f.Model, f.Samples, f.Needed)
		}
		out = append(out, termsafe.String(s))
	}
	return out
}

// maxExporterLines bounds the exporter pods a table names one by one: a
// fleet has one per node, and the JSON form lists them all.
const maxExporterLines = 20

// ExporterLines says which pods were taken for GPU exporters' own, and why:
// a pod that only scrapes the GPUs is never a job with a finding.
func ExporterLines(xs []features.Exporter) []string {
	if len(xs) == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("Taken as GPU exporters (scrape targets), not jobs: %d pods.", len(xs))}
	for i, x := range xs {
		if i == maxExporterLines {
			out = append(out, fmt.Sprintf("  ... and %d more (the JSON output lists them all)", len(xs)-i))
			break
		}
		out = append(out, termsafe.String(fmt.Sprintf("  %s/%s: %s", x.Namespace, x.Pod, x.Reason)))
	}
	return out
}

// ShareLines says each HAMi container's share of a GPU, its waste and the
// quota that would fit, one line each after a heading; none without shares.
func ShareLines(ws []features.ShareWaste) []string {
	if len(ws) == 0 {
		return nil
	}
	out := []string{"HAMi shares (reserved against used):"}
	for _, w := range ws {
		out = append(out, termsafe.String(fmt.Sprintf("  %s/%s/%s on %s %s: %s GPU-h of reserved cores unused over %s h. %s",
			w.Namespace, w.Pod, w.Container, w.Host, w.UUID, num(w.WastedGPUHours), num(w.Hours), w.Advice)))
	}
	return out
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kindCell is the finding's kind and what decided it: "interactive (owner
// Notebook kubeflow.org/v1 research/nb-1)", "interactive (Slurm batch
// flag)", "batch (name)", so a reader sees when only a name did.
func kindCell(f *finding.Finding) string {
	if f.KindSource == "" {
		return dash(f.Kind)
	}
	return dash(f.Kind) + " (" + f.KindSource + ")"
}
