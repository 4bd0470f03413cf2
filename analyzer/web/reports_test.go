package web

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// TestBuiltReports wires the report package: last week's reports, built from
// the store, listed and rendered with their charts inline.
func TestBuiltReports(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lastWeek := time.Date(2026, 11, 18, 10, 0, 0, 0, time.UTC) // W47; fixtureNow is in W48
	var us []store.Usage
	for h := 0; h < 10; h++ {
		start := lastWeek.Add(time.Duration(h) * time.Hour)
		us = append(us,
			store.Usage{Start: start, End: start.Add(time.Hour), Hostname: "gpu-a100-01", Job: "481920", User: "alice", Team: "vision",
				Kind: "batch", Model: "NVIDIA A100-SXM4-80GB", GPUs: 4, AllocatedGPUHours: 4, ActiveGPUHours: 0},
			store.Usage{Start: start, End: start.Add(time.Hour), Hostname: "gpu-h100-01", Job: "481777", User: "bob", Team: "nlp",
				Kind: "batch", Model: "NVIDIA H100 80GB HBM3", GPUs: 8, AllocatedGPUHours: 8, ActiveGPUHours: 8})
	}
	// This week's usage must not count in last week's report.
	us = append(us, store.Usage{Start: fixtureNow.Add(-time.Hour), End: fixtureNow, Hostname: "gpu-a100-01", Job: "9", User: "alice",
		Team: "vision", Kind: "batch", Model: "NVIDIA A100-SXM4-80GB", GPUs: 1, AllocatedGPUHours: 1})
	if err := st.AddUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	f := fixtureFindings()[0] // vision's cpu_only job
	f.Start, f.End, f.WastedGPUHours = lastWeek, lastWeek.Add(10*time.Hour), 40
	if err := st.SaveFindings(ctx, lastWeek.Add(10*time.Hour), []finding.Finding{f}); err != nil {
		t.Fatal(err)
	}
	cfg, err := report.ParseConfig("report.yml", []byte("timezone: UTC\nteams:\n  vision: {recipients: [v@example.org]}\n  nlp: {recipients: [n@example.org]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := report.NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return fixtureNow }
	src := BuiltReports{Builder: &report.Builder{Data: st, Config: cfg, Now: now}, Renderer: rd, Now: now}
	sums, err := src.LatestReports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]ReportSummary{}
	for _, s := range sums {
		got[s.Team] = s
	}
	cases := []struct {
		team             string
		allocated, activ float64
	}{{"", 120, 80}, {"vision", 40, 0}, {"nlp", 80, 80}}
	for _, c := range cases {
		s, ok := got[c.team]
		if !ok || s.Period != "2026-W47" || s.AllocatedGPUHours != c.allocated || s.ActiveGPUHours != c.activ {
			t.Errorf("team %q: %+v, want W47 with %v allocated, %v active", c.team, s, c.allocated, c.activ)
		}
	}
	if got["vision"].TopPattern != "cpu_only" {
		t.Errorf("vision's top pattern %q", got["vision"].TopPattern)
	}
	html, err := src.ReportHTML(ctx, "vision")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "data:image/png;base64,") || !strings.Contains(string(html), "vision") {
		t.Error("the report HTML lacks its inline charts or its team")
	}
	if _, err := src.ReportHTML(ctx, "nobody"); err != ErrNoReport {
		t.Errorf("unknown team: %v, want ErrNoReport", err)
	}
	// Through the page: the fleet first, then the teams.
	h := Handler(Options{Reports: src, Now: now})
	if code, hdr, body := get(t, h, "/reports/vision"); code != 200 || !strings.Contains(hdr.Get("Content-Security-Policy"), "img-src data:") || !strings.Contains(body, "data:image/png") {
		t.Errorf("/reports/vision: status %d", code)
	}
	_, _, body := get(t, h, "/reports")
	if i, j := strings.Index(body, "/reports/_fleet"), strings.Index(body, "/reports/nlp"); i < 0 || j < i {
		t.Error("reports page: the fleet report is not listed first")
	}
}
