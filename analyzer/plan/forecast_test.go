package plan

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// monthScenario writes a simulated month with weekly seasonality and
// growth: always-on services, one more each week, and on each day one-GPU
// training jobs that start in the morning and end in the evening: many on
// weekdays (most on Monday), few at weekends, one more a day each week,
// with seeded noise in the count and the hours.
func monthScenario(origin time.Time) string {
	rng := rand.New(rand.NewPCG(17, 28))
	var b strings.Builder
	fmt.Fprintf(&b, "name: planner-month\norigin: %s\nfleet:\n  - hostnames: [m-01, m-02, m-03]\n    model: A100-SXM4-80GB\n    gpus: 8\nworkloads:\n",
		origin.Format(time.RFC3339))
	for s := 0; s < 7; s++ {
		start := max(0, s-3) * 7 * 24 // hours: four from the start, then one more a week
		fmt.Fprintf(&b, "  - {id: svc-%d, scheduler: kubernetes, user: svc, team: serving, kind: service, node: m-03, gpus: [%d], start: %dh, end: 28d, behaviour: inference_daily}\n", s, 1+s, start)
	}
	base := []int{12, 10, 10, 9, 8, 3, 2} // Monday first
	for d := 0; d < 28; d++ {
		week := d / 7
		n := base[d%7] + week + rng.IntN(3) - 1
		for j := 0; j < n && j < 17; j++ {
			start := 8*time.Hour + time.Duration(rng.IntN(9))*15*time.Minute
			end := 17*time.Hour + time.Duration(rng.IntN(9))*15*time.Minute
			day := time.Duration(d) * 24 * time.Hour
			fmt.Fprintf(&b, "  - {id: \"%d\", user: u%d, team: vision, kind: batch, node: m-%02d, gpus: [%d], start: %s, end: %s, behaviour: training}\n",
				70000+d*100+j, j%5, j/8+1, j%8, dur(day+start), dur(day+end))
		}
	}
	return b.String()
}

func dur(d time.Duration) string { return fmt.Sprintf("%dm", int(d.Minutes())) }

// TestForecastMonth: the plan's week-ahead forecast of demand, backtested
// on the last two weeks of a simulated month read from the store, takes
// the method that erred less, errs less than 20 % (MAPE of next-week hourly
// demand), and names Monday's working hours as the peak.
func TestForecastMonth(t *testing.T) {
	t.Parallel()
	origin := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC) // a Monday
	sc, err := sim.ParseScenario("planner-month", []byte(monthScenario(origin)))
	if err != nil {
		t.Fatal(err)
	}
	span := 28 * 24 * time.Hour
	// Retention must cover the month: with the 15-day default, background
	// compaction may delete the first weeks mid-test, and how much it has
	// deleted by query time depends on timing.
	db, _ := simloadtest.Store(t, sc, simload.Options{Seed: seed, Origin: origin, To: span, Resolution: 10 * time.Minute},
		embedded.Options{Retention: span + 7*24*time.Hour})
	ctx := context.Background()
	p, err := Build(ctx, db, origin, origin.Add(span), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Pools) != 1 || p.Pools[0].Forecast == nil || p.Pools[0].Forecast.Backtest == nil {
		t.Fatalf("no forecast with a backtest: %+v", p.Pools)
	}
	f := p.Pools[0].Forecast
	bt := f.Backtest
	t.Logf("backtest over %d weeks: Holt-Winters MAPE %.1f %%, seasonal naive %.1f %%; method %s; %v",
		bt.Folds, 100*bt.HoltWinters, 100*bt.Naive, f.Method, f.Reserve)
	if bt.Folds != 2 {
		t.Errorf("%d backtest weeks, want 2", bt.Folds)
	}
	// The method is whichever erred less, and that error is small.
	best, want := min(bt.HoltWinters, bt.Naive), "seasonal_naive"
	if bt.HoltWinters < bt.Naive {
		want = "holt_winters"
	}
	if f.Method != want || len(f.Next) != HoursOfWeek || len(f.NextAllocated) != HoursOfWeek {
		t.Errorf("method %s with %d points (%d allocated), want %s with %d", f.Method, len(f.Next), len(f.NextAllocated), want, HoursOfWeek)
	}
	if best >= 0.2 {
		t.Errorf("best backtest MAPE %.1f %%, want < 20 %%", 100*best)
	}
	if f.Measure != "sm_active" || f.Weeks != 4 {
		t.Errorf("forecast of %s from %d weeks, want sm_active from 4", f.Measure, f.Weeks)
	}
	// Nights are spare: the batch GPUs sit unallocated from the evening on.
	heat := p.Pools[0].Heat
	t.Logf("batch windows: %v", heat.Windows)
	night := false
	for _, w := range heat.Windows {
		// A window covering 22:00-07:00 starts by 22:00 and ends at or
		// after 07:00 of the next day.
		night = night || (w.From <= 22 && w.To >= 31 && w.Share >= 0.5)
	}
	if !night {
		t.Errorf("no batch window over 22:00-07:00 with half the pool spare: %v", heat.Windows)
	}
	// The busiest span of the coming week is Monday's working hours.
	if len(f.Reserve) == 0 {
		t.Fatal("no reservation advised")
	}
	r := f.Reserve[0]
	if r.From.Weekday() != time.Monday || r.From.Hour() < 8 || r.To.Hour() > 20 || r.GPUs < 20 || r.OfLevel <= 1 {
		t.Errorf("first peak %s, want Monday daytime with at least 20 GPUs allocated, above the weekday level", r)
	}
}
