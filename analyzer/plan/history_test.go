package plan

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// replaySpan replays a built-in scenario over (from, to] (offsets from its
// origin) into a fresh embedded store: a gpuwatch that started scraping at
// from.
func replaySpan(t *testing.T, name string, from, to time.Duration) (*embedded.DB, time.Time) {
	t.Helper()
	sc, err := sim.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return simloadtest.Store(t, sc, simload.Options{Seed: seed, Origin: sc.Origin, From: from, To: to, Resolution: 30 * time.Second}, embedded.Options{})
}

// TestPlanRefusesShortHistory: a week's plan asked for soon after the first
// scrape is refused with one line that says how much history there is, how
// much the plan needs and when to ask again, as analyze refuses a window
// too short for its detectors; it used to report "167 h, coverage 100 %"
// and GPUs to free from ten minutes of samples, or, before the first whole
// hour, stop after "Pools by ".
func TestPlanRefusesShortHistory(t *testing.T) {
	t.Parallel()
	// The first scrape at 00:50; asked at 01:00 and at 00:55.
	db, origin := replaySpan(t, "planner-daynight", 50*time.Minute, time.Hour)
	hour := origin.Add(time.Hour)
	for _, c := range []struct {
		name string
		to   time.Time
		want []string
	}{
		{"ten minutes in a whole hour", hour, []string{"1 h of hourly data", "needs 24 h (--plan.min-history)", "plan again after " + hour.Add(23*time.Hour).Format(time.RFC3339)}},
		{"before the first whole hour", hour.Add(-5 * time.Minute), []string{"no GPU samples in any whole clock hour", "the current hour is not read until it ends", "24 h"}},
	} {
		p, err := Build(context.Background(), db, c.to.Add(-7*24*time.Hour), c.to, Options{})
		var short *ShortHistoryError
		if !errors.As(err, &short) {
			t.Fatalf("%s: plan %v, error %v; want a refusal", c.name, p, err)
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: refusal spans lines: %q", c.name, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: refusal %q lacks %q", c.name, msg, w)
			}
		}
	}
	// The operator may plan on less, and is then told how little of the
	// window the data covers: one hour of the week (the data's resolution
	// is its best hour's: ten minutes' samples stand for a whole hour),
	// not all of it.
	p, err := Build(context.Background(), db, hour.Add(-7*24*time.Hour), hour, Options{MinHistory: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if want := 1.0 / 168; math.Abs(p.Coverage-want) > 1e-9 || p.HistoryHours != 1 || p.Hours != 168 {
		t.Errorf("coverage %.5f, history %d h of %d h; want %.5f of the week asked for, 1 h", p.Coverage, p.HistoryHours, p.Hours, want)
	}
}

// TestPlanOnPartHistory: thirty hours of data in a week's window plan, with
// coverage against the week asked for, no forecast (it needs a week) and
// the table's every sentence whole.
func TestPlanOnPartHistory(t *testing.T) {
	t.Parallel()
	db, origin := replaySpan(t, "planner-daynight", 0, 30*time.Hour)
	to := origin.Add(30 * time.Hour)
	p, err := Build(context.Background(), db, to.Add(-7*24*time.Hour), to, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := 30.0 / 168; math.Abs(p.Coverage-want) > 0.02 || p.HistoryHours != 30 {
		t.Errorf("coverage %.3f, history %d h; want %.3f (30 h of 168), 30 h", p.Coverage, p.HistoryHours, want)
	}
	if !strings.Contains(p.Headline(), "(168 h, coverage 18 %)") {
		t.Errorf("headline %q", p.Headline())
	}
	for _, pl := range p.Pools {
		if pl.Forecast != nil {
			t.Errorf("pool %s: a forecast from 30 h of history", pl.Name)
		}
		if pl.Heat == nil {
			t.Fatalf("pool %s: no heat map", pl.Name)
		}
		checkHeatLegend(t, HeatMapSVG(pl.Heat), pl.Heat.GPUs)
	}
	var out bytes.Buffer
	if err := Table(&out, p); err != nil {
		t.Fatal(err)
	}
	checkWholeSentences(t, out.String())
	if !strings.Contains(out.String(), "Demand forecast: none, it needs a week of history and the data reaches back 30 h") {
		t.Errorf("the table does not say why there is no forecast:\n%s", out.String())
	}
}

// checkWholeSentences fails on a line that ends where its sentence has
// only begun ("Pools by ", "Read from x: ") and on "0 GPUs more".
func checkWholeSentences(t *testing.T, text string) {
	t.Helper()
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasSuffix(trimmed, " by") || strings.HasSuffix(trimmed, ":") && !strings.HasPrefix(trimmed, "Pool ") {
			t.Errorf("half a sentence: %q", line)
		}
		if strings.Contains(line, " 0 GPUs more") {
			t.Errorf("%q", line)
		}
	}
}

// TestSlicingChoice: every answer of the slicing rule names how many GPUs
// it costs; none says "0 GPUs more" (every plan said "MIG would cost more
// than 0 GPUs more", and a MIG answer "at most 0 GPUs more").
func TestSlicingChoice(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		useMIG, interactive, anySlice bool
		mig, ts, margin               int
		want                          string
	}{
		{false, false, true, 5, 4, 0, "time-slicing: MIG would need 1 GPU more"},
		{false, false, true, 9, 4, 2, "time-slicing: MIG would need 5 GPUs more, over the isolation margin of 2 GPUs"},
		{false, false, false, 4, 4, 0, "time-slicing: no allocation fits a MIG slice"},
		{true, false, true, 4, 4, 0, "MIG: no more GPUs than time-slicing"},
		{true, false, true, 3, 4, 0, "MIG: no more GPUs than time-slicing"},
		{true, false, true, 5, 4, 1, "MIG: 1 GPU more than time-slicing, within the isolation margin of 1 GPU"},
		{true, true, true, 6, 4, 0, "MIG for interactive sessions, whose memory no history predicts"},
	} {
		got := slicingChoice(c.useMIG, c.interactive, c.anySlice, c.mig, c.ts, c.margin)
		if got != c.want {
			t.Errorf("slicingChoice(%+v) = %q, want %q", c, got, c.want)
		}
		if strings.Contains(got, " 0 GPU") {
			t.Errorf("%q", got)
		}
	}
}

// TestMIGCostsMore: the trade-off names how many GPUs MIG would cost,
// never "more than 0 GPUs more".
func TestMIGCostsMore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		more, margin int
		want         string
	}{
		{1, 0, "MIG would need 1 GPU more"},
		{3, 0, "MIG would need 3 GPUs more"},
		{3, 2, "MIG would need 3 GPUs more, over the isolation margin of 2 GPUs"},
	} {
		if got := migCostsMore(c.more, c.margin); got != c.want {
			t.Errorf("migCostsMore(%d, %d) = %q, want %q", c.more, c.margin, got, c.want)
		}
	}
}

// checkHeatLegend: the heat map is well-formed SVG whose legend says what
// its shades mean: the share of the pool's GPUs idle or unallocated, from
// 0 to 100 %, and the grey of an hour without data, all inside the image.
func checkHeatLegend(t *testing.T, svg string, gpus int) {
	t.Helper()
	var doc struct {
		Height int `xml:"height,attr"`
		G      struct {
			Texts []struct {
				Y    int    `xml:"y,attr"`
				Text string `xml:",chardata"`
			} `xml:"text"`
		} `xml:"g"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("heat map SVG: %v", err)
	}
	var words []string
	for _, tx := range doc.G.Texts {
		words = append(words, tx.Text)
	}
	got := strings.Join(words, " ")
	if want := fmt.Sprintf("Share 0%% 25%% 50%% 75%% 100%% of %d GPUs idle or unallocated no data", gpus); got != want {
		t.Errorf("heat map legend %q, want %q", got, want)
	}
	for _, tx := range doc.G.Texts {
		if tx.Y > doc.Height {
			t.Errorf("legend text %q at y %d, below the image's %d px", tx.Text, tx.Y, doc.Height)
		}
	}
}

// A daemon on a fleet younger than a plan needs says so at INFO, once an
// hour, not as a failure; other failures stay warnings.
func TestRefreshLogsShortHistoryAsInfo(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db, origin := replaySpan(t, "planner-daynight", 50*time.Minute, time.Hour)
	r := &Refresher{Querier: db, Now: func() time.Time { return origin.Add(time.Hour) }}
	err := r.Refresh(context.Background())
	var short *ShortHistoryError
	if !errors.As(err, &short) {
		t.Fatalf("refresh on 10 minutes: %v; want a refusal", err)
	}
	logRefresh(logger, err)
	logRefresh(logger, errors.New("query: connection refused"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "no capacity plan yet") ||
		!strings.Contains(lines[1], "level=WARN") {
		t.Errorf("logged:\n%s\nwant the refusal at INFO and the failure at WARN", buf.String())
	}
}
