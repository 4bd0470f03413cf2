package report

import (
	"bytes"
	"fmt"
	"image/color"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart colours, shared with the HTML so legends and tables agree.
var (
	colAllocated = color.RGBA{R: 0xc9, G: 0xd1, B: 0xdb, A: 0xff}
	colUsed      = color.RGBA{R: 0x2e, G: 0x9e, B: 0x6b, A: 0xff}
	colWasted    = color.RGBA{R: 0xd9, G: 0x48, B: 0x3b, A: 0xff}
	colInk       = color.RGBA{R: 0x33, G: 0x3d, B: 0x4a, A: 0xff}
	colGrid      = color.RGBA{R: 0xe6, G: 0xe9, B: 0xee, A: 0xff}
)

// Chart images: display size in CSS pixels; drawn at chartDPI for sharp
// text on high-density screens.
const (
	chartWidthPx  = 640
	chartHeightPx = 260
	chartDPI      = 144
)

// Image is a rendered chart.
type Image struct {
	CID    string
	Alt    string
	Width  int // CSS pixels
	Height int
	PNG    []byte
}

// Charts draws the report's charts: daily allocated, used and wasted
// GPU-hours, and the waste by pattern (when there is any).
func Charts(r *Report) ([]Image, error) {
	daily, err := dailyChart(r)
	if err != nil {
		return nil, fmt.Errorf("daily chart: %w", err)
	}
	out := []Image{{CID: "daily.png", Alt: "Daily GPU-hours: allocated, used, wasted", Width: chartWidthPx, Height: chartHeightPx, PNG: daily}}
	if len(r.ByPattern) > 0 {
		h := 70 + 34*len(r.ByPattern)
		pat, err := patternChart(r, h)
		if err != nil {
			return nil, fmt.Errorf("pattern chart: %w", err)
		}
		out = append(out, Image{CID: "patterns.png", Alt: "Wasted GPU-hours by pattern", Width: chartWidthPx, Height: h, PNG: pat})
	}
	return out, nil
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Title.TextStyle.Color = colInk
	p.Title.Padding = vg.Points(6)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Color = colGrid
		ax.Tick.Color = colGrid
		ax.Tick.Label.Font.Size = vg.Points(8.5)
		ax.Tick.Label.Color = colInk
		ax.Label.TextStyle.Font.Size = vg.Points(9)
		ax.Label.TextStyle.Color = colInk
	}
	p.Legend.TextStyle.Font.Size = vg.Points(8.5)
	p.Legend.TextStyle.Color = colInk
	// Sans like the HTML around it; gonum's default is a serif face.
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Tick.Label.Font, &p.Y.Tick.Label.Font,
		&p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
	return p
}

// plainTicks labels ticks without trailing zeros ("250", not "250.00").
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = group(strconv.FormatFloat(ts[i].Value, 'f', -1, 64))
		}
	}
	return ts
}

func dailyChart(r *Report) ([]byte, error) {
	p := newPlot("GPU-hours per day")
	p.Y.Label.Text = "GPU-hours"
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	grid.Horizontal.Color = colGrid
	p.Add(grid)
	n := len(r.Daily)
	alloc, used, wasted := make(plotter.Values, n), make(plotter.Values, n), make(plotter.Values, n)
	names := make([]string, n)
	for i, d := range r.Daily {
		alloc[i], used[i], wasted[i] = d.AllocatedGPUHours, d.ActiveGPUHours, d.WastedGPUHours
		names[i] = d.Date
		if t, err := time.Parse("2006-01-02", d.Date); err == nil {
			names[i] = t.Format("Mon 02")
		}
	}
	w := vg.Points(12)
	if n > 10 {
		w = vg.Points(6)
	}
	for i, s := range []struct {
		v     plotter.Values
		c     color.Color
		label string
	}{{alloc, colAllocated, "allocated"}, {used, colUsed, "used (GPU active)"}, {wasted, colWasted, "wasted (findings)"}} {
		b, err := plotter.NewBarChart(s.v, w)
		if err != nil {
			return nil, err
		}
		b.Color = s.c
		b.LineStyle.Width = 0
		b.Offset = vg.Length(i-1) * (w + vg.Points(1))
		p.Add(b)
		p.Legend.Add(s.label, b)
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Legend.Padding = vg.Points(2.5)
	p.Legend.ThumbnailWidth = vg.Points(12)
	p.NominalX(names...)
	p.Y.Max = max(p.Y.Max*1.35, 1) // room for the legend
	return drawPNG(p, chartWidthPx, chartHeightPx)
}

func patternChart(r *Report, heightPx int) ([]byte, error) {
	p := newPlot("Wasted GPU-hours by pattern")
	p.X.Min = 0
	p.X.Tick.Marker = plainTicks{}
	grid := plotter.NewGrid()
	grid.Horizontal.Width = 0
	grid.Vertical.Color = colGrid
	p.Add(grid)
	n := len(r.ByPattern)
	vals := make(plotter.Values, n)
	names := make([]string, n)
	// Largest at the top: the y axis grows upwards.
	for i, row := range r.ByPattern {
		vals[n-1-i] = row.WastedGPUHours
		names[n-1-i] = row.Label
	}
	b, err := plotter.NewBarChart(vals, vg.Points(14))
	if err != nil {
		return nil, err
	}
	b.Horizontal = true
	b.Color = colWasted
	b.LineStyle.Width = 0
	p.Add(b)
	p.NominalY(names...)
	p.X.Max = max(p.X.Max*1.05, 1)
	return drawPNG(p, chartWidthPx, heightPx)
}

func drawPNG(p *plot.Plot, wPx, hPx int) ([]byte, error) {
	w := vg.Length(wPx) * vg.Inch / 96
	h := vg.Length(hPx) * vg.Inch / 96
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(chartDPI), vgimg.UseBackgroundColor(color.White))
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
