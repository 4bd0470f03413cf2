package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// gh formats GPU-hours: one decimal, thousands grouped ("12,345.6").
func gh(v float64) string { return group(strconv.FormatFloat(v, 'f', 1, 64)) }

// money formats a cost: no decimals above 100, two below.
func money(v float64, currency string) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if math.Abs(v) >= 100 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	s = group(s)
	if currency == "" {
		return s
	}
	return s + " " + currency
}

// pct formats a ratio as a percentage with one decimal.
func pct(r float64) string { return strconv.FormatFloat(100*r, 'f', 1, 64) + "%" }

func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac := s, ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		intPart, frac = s[:i], s[i:]
	}
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String() + frac
	if neg {
		out = "-" + out
	}
	return out
}

// change describes this period's wasted share against the previous one.
func change(trend []TrendRow) string {
	if len(trend) < 2 {
		return ""
	}
	prev, cur := trend[len(trend)-2], trend[len(trend)-1]
	if prev.AllocatedGPUHours == 0 {
		return "no usage in " + prev.Label + " to compare with"
	}
	d := 100 * (cur.WastedShare - prev.WastedShare)
	switch {
	case math.Abs(d) < 0.05:
		return fmt.Sprintf("unchanged from %s (%s)", prev.Label, pct(prev.WastedShare))
	case d < 0:
		return fmt.Sprintf("down %.1f points from %s (%s) — better", -d, prev.Label, pct(prev.WastedShare))
	}
	return fmt.Sprintf("up %.1f points from %s (%s) — worse", d, prev.Label, pct(prev.WastedShare))
}

// Subject is the email subject line.
func Subject(r *Report) string {
	who := "team " + r.Team
	if r.Team == "" {
		who = "fleet"
	}
	when := "week " + r.Period.Label
	if r.Period.Kind == Day {
		when = r.Period.Label
	}
	return fmt.Sprintf("[gpuwatch] GPU waste, %s, %s: %s GPU-hours wasted (%s of %s allocated)",
		who, when, gh(r.Totals.WastedGPUHours), pct(r.Totals.WastedShare), gh(r.Totals.AllocatedGPUHours))
}

// GPUHours formats GPU-hours as reports print them.
func GPUHours(v float64) string { return gh(v) }

// Percent formats a ratio as reports print it.
func Percent(r float64) string { return pct(r) }
