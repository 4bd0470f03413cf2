package report_test

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/report/reporttest"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// exampleReport is the docs example: three teams, five weeks of history.
func exampleReport(t *testing.T) (*report.Report, *report.Rendered) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := reporttest.Fill(ctx, st, reporttest.Fleet{Seed: 2026, GPUs: 96, Teams: teams,
		Start: weekStart.AddDate(0, 0, -28), End: weekStart.AddDate(0, 0, 7)}); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, smtpOpts{port: 25, password: "x"})
	b := report.NewBuilder(st, cfg)
	b.Now = func() time.Time { return slot }
	r, err := b.Build(ctx, report.WeekOf(weekStart, berlin), "ml-research")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := report.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	out, err := rd.Render(r, report.ImagesDataURI)
	if err != nil {
		t.Fatal(err)
	}
	return r, out
}

func screenshot(t *testing.T, htmlPath, pngPath string, w, h int) image.Image {
	t.Helper()
	bin := testtool.Need(t, "chromium", "/usr/bin/chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--screenshot="+pngPath, "--window-size="+itoa(w)+","+itoa(h), "file://"+htmlPath)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestHTMLRendersInChromium(t *testing.T) {
	t.Parallel()
	_, out := exampleReport(t)
	dir := t.TempDir()
	htmlPath := filepath.Join(dir, "report.html")
	if err := os.WriteFile(htmlPath, []byte(out.HTML), 0o644); err != nil {
		t.Fatal(err)
	}
	img := screenshot(t, htmlPath, filepath.Join(dir, "report.png"), 1000, 1600)
	if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != 1600 {
		t.Fatalf("screenshot is %v", b)
	}
	st := pixelStats(img)
	t.Logf("colours %d, non-background %.1f%%, chart green %d px, red %d px", st.colours, 100*st.ink, st.green, st.red)
	if st.colours < 200 {
		t.Errorf("only %d colours: blank or unstyled page", st.colours)
	}
	if st.ink < 0.05 {
		t.Errorf("only %.1f%% of the page is not background", 100*st.ink)
	}
	// The "used" bars exist only in the daily chart; the red of "wasted"
	// fills the pattern chart's bars.
	if st.green < 3000 {
		t.Errorf("daily chart missing: %d px of its green", st.green)
	}
	if st.red < 8000 {
		t.Errorf("waste charts missing: %d px of their red", st.red)
	}
	if os.Getenv("GPUWATCH_UPDATE_DOCS") != "" {
		docs := filepath.Join("..", "..", "docs")
		if err := os.WriteFile(filepath.Join(docs, "report-example.html"), []byte(out.HTML), 0o644); err != nil {
			t.Fatal(err)
		}
		screenshot(t, htmlPath, filepath.Join(docs, "report-example.png"), 760, 3300)
	}
}

type stats struct {
	colours int
	ink     float64
	green   int
	red     int
}

func pixelStats(img image.Image) stats {
	seen := map[uint32]bool{}
	var s stats
	b := img.Bounds()
	bg := color.RGBA{0xee, 0xf1, 0xf5, 0xff}
	total, ink := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r8, g8, b8 := uint8(r>>8), uint8(g>>8), uint8(bl>>8)
			seen[uint32(r8)<<16|uint32(g8)<<8|uint32(b8)] = true
			total++
			if !near8(r8, g8, b8, bg) && !near8(r8, g8, b8, color.RGBA{0xff, 0xff, 0xff, 0xff}) {
				ink++
			}
			if near8(r8, g8, b8, color.RGBA{0x2e, 0x9e, 0x6b, 0xff}) {
				s.green++
			}
			if near8(r8, g8, b8, color.RGBA{0xd9, 0x48, 0x3b, 0xff}) {
				s.red++
			}
		}
	}
	s.colours = len(seen)
	s.ink = float64(ink) / float64(total)
	return s
}

func near8(r, g, b uint8, c color.RGBA) bool {
	d := func(a, b uint8) int {
		if a > b {
			return int(a - b)
		}
		return int(b - a)
	}
	return d(r, c.R) <= 12 && d(g, c.G) <= 12 && d(b, c.B) <= 12
}
