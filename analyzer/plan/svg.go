package plan

import (
	"fmt"
	"math"
	"strings"
)

var dayNames = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

// HeatMapSVG draws a pool's spare capacity by hour of week as an inline SVG:
// one row per day, one cell per hour, darker where more of the pool was
// allocated-but-idle or unallocated; hours the window did not cover are
// hatched grey. It holds only numbers and fixed words, no input text.
func HeatMapSVG(h *HeatMap) string {
	const cell, left, top, legend = 22, 40, 18, 30
	var b strings.Builder
	w, ht := left+24*cell+4, top+7*cell+4+legend
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="Idle and unallocated GPUs by hour of week">`, w, ht, w, ht)
	for hr := 0; hr < 24; hr += 3 {
		fmt.Fprintf(&b, `<text x="%d" y="12" font-size="10" fill="#6b7280">%02d</text>`, left+hr*cell+2, hr)
	}
	for d := 0; d < 7; d++ {
		fmt.Fprintf(&b, `<text x="0" y="%d" font-size="11" fill="#374151">%s</text>`, top+d*cell+15, dayNames[d])
		for hr := 0; hr < 24; hr++ {
			i := d*24 + hr
			x, y := left+hr*cell, top+d*cell
			if h.Idle[i] < 0 || h.GPUs == 0 {
				fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f3f4f6"/>`, x, y, cell-2, cell-2)
				continue
			}
			share := math.Min(1, (h.Idle[i]+h.Unallocated[i])/float64(h.GPUs))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#d9483b" fill-opacity="%.2f"><title>%s %02d:00 %.1f idle, %.1f unallocated of %d GPUs</title></rect>`,
				x, y, cell-2, cell-2, heatOpacity(share), dayNames[d], hr, h.Idle[i], h.Unallocated[i], h.GPUs)
		}
	}
	heatLegend(&b, left, top+7*cell+10, h.GPUs)
	b.WriteString(`</svg>`)
	return b.String()
}

// heatOpacity is the cell's shade for a share of the pool's GPUs idle or
// unallocated: faint at none, full at all.
func heatOpacity(share float64) float64 { return 0.08 + 0.92*share }

// heatLegend says what a cell's shade means: swatches at 0, 25, 50, 75 and
// 100 % of the pool's GPUs idle or unallocated, and the grey of an hour
// without data.
func heatLegend(b *strings.Builder, x, y, gpus int) {
	const sw = 14
	fmt.Fprintf(b, `<g class="legend"><text x="0" y="%d" font-size="10" fill="#6b7280">Share</text>`, y+11)
	for i, share := range []float64{0, 0.25, 0.5, 0.75, 1} {
		sx := x + i*44
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#d9483b" fill-opacity="%.2f"/><text x="%d" y="%d" font-size="10" fill="#374151">%.0f%%</text>`,
			sx, y, sw, sw, heatOpacity(share), sx+sw+3, y+11, 100*share)
	}
	nx := x + 5*44
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10" fill="#374151">of %d GPUs idle or unallocated</text>`, nx, y+11, gpus)
	nx += 190
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#f3f4f6" stroke="#d1d5db"/><text x="%d" y="%d" font-size="10" fill="#374151">no data</text></g>`,
		nx, y, sw, sw, nx+sw+3, y+11)
}

// ForecastSVG draws the pool's allocated GPUs by hour of week over the
// window (grey: the mean of the weeks seen) and the week-ahead forecast of
// compute demand in GPU-equivalents (blue) as an inline SVG.
func ForecastSVG(h *HeatMap, f *Forecast) string {
	const wd, ht, left, bottom = 560, 180, 34, 20
	top := 0.0
	for i := 0; i < HoursOfWeek; i++ {
		if h != nil {
			top = max(top, h.Allocated[i])
		}
		if f != nil && i < len(f.ByHourOfWeek) {
			top = max(top, f.ByHourOfWeek[i])
		}
	}
	top = math.Max(1, math.Ceil(top*1.1))
	x := func(i int) float64 { return left + float64(i)*float64(wd-left-4)/float64(HoursOfWeek-1) }
	y := func(v float64) float64 { return float64(ht-bottom) - v/top*float64(ht-bottom-6) }
	line := func(vs []float64, colour string) string {
		var pts []string
		for i, v := range vs {
			if v < 0 {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		return fmt.Sprintf(`<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, colour, strings.Join(pts, " "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="Allocated GPUs by hour of week and the forecast demand">`, wd, ht, wd, ht)
	for d := 0; d < 7; d++ {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="4" y2="%d" stroke="#e5e7eb"/><text x="%.1f" y="%d" font-size="10" fill="#6b7280">%s</text>`,
			x(d*24), x(d*24), ht-bottom, x(d*24)+3, ht-6, dayNames[d])
	}
	fmt.Fprintf(&b, `<text x="0" y="12" font-size="10" fill="#6b7280">%.0f</text><text x="0" y="%d" font-size="10" fill="#6b7280">0</text>`, top, ht-bottom)
	if h != nil {
		b.WriteString(line(h.Allocated, "#9ca3af"))
	}
	if f != nil {
		b.WriteString(line(f.ByHourOfWeek, "#2563eb"))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
