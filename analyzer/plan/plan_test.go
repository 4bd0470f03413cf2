package plan

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

const seed = 17

// loadScenario replays a built-in scenario over [0, span] at res into a
// fresh embedded store per format, in one replay.
func loadScenario(t testing.TB, name string, span, res time.Duration, fs ...simload.Format) ([]*embedded.DB, time.Time) {
	t.Helper()
	sc, err := sim.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dbs := make([]*embedded.DB, len(fs))
	sinks := make([]simload.Sink, len(fs))
	for i, f := range fs {
		db, err := embedded.Open(t.TempDir(), embedded.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		dbs[i] = db
		app := db.Appender()
		sinks[i] = f.Sink(func(ts time.Time, fams []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, fams) })
	}
	fan := simload.NewFanout(ctx, sinks...)
	origin, err := simload.Replay(ctx, sc, simload.Options{Seed: seed, Origin: sc.Origin, From: 0, To: span, Resolution: res}, fan.Sink)
	if cerr := fan.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return dbs, origin
}

// checkLayouts fails when a proposed MIG layout breaks the model's geometry.
func checkLayouts(t *testing.T, p *Plan) {
	t.Helper()
	for _, pl := range p.Pools {
		g, ok := mig.Lookup(pl.Model)
		for i, gp := range pl.Layout {
			if gp.Mode != "mig" {
				continue
			}
			if !ok {
				t.Errorf("pool %s: MIG layout on a model without MIG", pl.Name)
				continue
			}
			if err := g.Validate(gp.Layout); err != nil {
				t.Errorf("pool %s GPU %d: %v", pl.Name, i, err)
			}
			if len(gp.Layout) != len(gp.Jobs) {
				t.Errorf("pool %s GPU %d: %d instances for %d jobs", pl.Name, i, len(gp.Layout), len(gp.Jobs))
			}
		}
	}
}

// TestCorpusKnownOptimum: on scenarios whose best packing is known by
// construction, the plan needs within 5 % of the optimum and proposes only
// layouts the hardware accepts, on data with profiling fields and on stock
// dcgm-exporter data alike (no profiling fields, Hostname), where compute is
// GPU util: a share of time, which time-sliced work takes in turns.
func TestCorpusKnownOptimum(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scenario string
		optimum  int
		held     int
		strategy string
		rec      string // the recommendation every allocation gets
	}{
		{"planner-consolidate", 28, 65, "time_slice", ""},
		{"planner-notebooks", 2, 14, "mig", RecMIG},
		{"planner-daynight", 8, 16, "time_slice", RecWhole},
	}
	t.Run("prometheus", testCorpusThroughPrometheus)
	t.Run("notebooks-isolation", testNotebooksIsolation)
	t.Run("monday-demand-peak", testMondayDemandPeak)
	t.Run("planner-daypairs", testDayPairs)
	for _, c := range cases {
		t.Run(c.scenario, func(t *testing.T) {
			t.Parallel()
			span := 24 * time.Hour
			dbs, origin := loadScenario(t, c.scenario, span, 5*time.Minute, simload.Format{}, simload.Format{Stock: true, NoProf: true})
			for i, db := range dbs {
				stock := i == 1
				cq := &query.Counting{Q: db}
				p, err := Build(context.Background(), cq, origin, origin.Add(span), Options{})
				if err != nil {
					t.Fatal(err)
				}
				// No recording rules in the store: the probes find none and
				// the plan reads raw series, saying why.
				if want := Probes + QueriesRaw; cq.Count() != int64(want) || p.Queries != want {
					t.Errorf("%d queries (plan says %d), want %d", cq.Count(), p.Queries, want)
				}
				if p.Read != "raw series" || !strings.Contains(p.ReadReason, "no recorded series") {
					t.Errorf("read %s (%s), want raw series for want of recorded ones", p.Read, p.ReadReason)
				}
				if len(p.Pools) != 1 {
					t.Fatalf("%d pools, want 1", len(p.Pools))
				}
				pl := p.Pools[0]
				t.Logf("%s (stock %v): %s; pool %s: time-slice %d, MIG %d", c.scenario, stock, p.Headline(), pl.Name, pl.TimeSliceGPUs, pl.MIGGPUs)
				if pl.Held != c.held || pl.Unknown != 0 {
					t.Errorf("held %d (unknown %d), want %d (0)", pl.Held, pl.Unknown, c.held)
				}
				if pl.Freeable != pl.Held-pl.Needed {
					t.Errorf("freeable %d, want held - needed = %d", pl.Freeable, pl.Held-pl.Needed)
				}
				if pl.Contention > 0.9+1e-9 {
					t.Errorf("p95 contention %.2f above the target load", pl.Contention)
				}
				checkLayouts(t, p)
				// Pooling view: the teams' GPUs add up to the pool's, and
				// packing each team on its own never needs fewer GPUs than
				// packing the pool together.
				var teamHeld, teamNeeded int
				for _, tm := range p.Teams {
					teamHeld += tm.Held
					teamNeeded += tm.Needed
					if tm.GPUHours != nil {
						t.Errorf("team %s: GPU-hours %+v without the analyzer's records; the planner judges no waste itself", tm.Team, *tm.GPUHours)
					}
				}
				if teamHeld != pl.Held || teamNeeded < pl.Needed {
					t.Errorf("teams hold %d and need %d GPUs; the pool holds %d and needs %d", teamHeld, teamNeeded, pl.Held, pl.Needed)
				}
				if gap := float64(pl.Needed-c.optimum) / float64(c.optimum); pl.Needed < c.optimum || gap > 0.05 {
					t.Errorf("needed %d GPUs, known optimum %d", pl.Needed, c.optimum)
				}
				if pl.Strategy != c.strategy {
					t.Errorf("strategy %s, want %s", pl.Strategy, c.strategy)
				}
				for _, a := range p.Allocations {
					if c.rec != "" && a.Recommendation != c.rec {
						t.Errorf("%s: recommendation %s (%s), want %s; compute %+v memory %+v", a.Job, a.Recommendation, a.Profile, c.rec, a.Compute, a.Memory)
					}
					if c.rec == RecMIG && a.Profile != "1g.10gb" {
						t.Errorf("%s: profile %s, want 1g.10gb", a.Job, a.Profile)
					}
				}
			}
		})
	}
}

// TestUnknownNeverFreeable: an allocation whose demand cannot be read
// (its samples cut to fewer than the minimum) keeps its GPU.
func TestUnknownNeverFreeable(t *testing.T) {
	t.Parallel()
	span := 24 * time.Hour
	dbs, origin := loadScenario(t, "planner-notebooks", span, 5*time.Minute, simload.Format{})
	p, err := Build(context.Background(), dbs[0], origin, origin.Add(span), Options{MinSamples: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	pl := p.Pools[0]
	if pl.Unknown != 14 || pl.Needed != 14 || pl.Freeable != 0 {
		t.Errorf("all demand unknown: needed %d, unknown %d, freeable %d; want 14, 14, 0", pl.Needed, pl.Unknown, pl.Freeable)
	}
	for _, a := range p.Allocations {
		if a.Recommendation != RecUnknown {
			t.Errorf("%s: %s, want %s", a.Job, a.Recommendation, RecUnknown)
		}
	}
}

func TestHourOfWeek(t *testing.T) {
	mon := time.Date(2026, 11, 2, 9, 30, 0, 0, time.UTC)
	if h := HourOfWeek(mon, time.UTC); h != 9 {
		t.Errorf("Monday 09:30 is hour %d, want 9", h)
	}
	if h := HourOfWeek(mon.Add(-10*time.Hour), time.UTC); h != 167 {
		t.Errorf("Sunday 23:30 is hour %d, want 167", h)
	}
	if h := HourOfWeek(mon, time.FixedZone("CET", 3600)); h != 10 {
		t.Errorf("Monday 09:30 UTC is hour %d in CET, want 10", h)
	}
}

// testDayPairs: 8 day and 8 night services, two of a kind fitting under
// the target at their peak. The time-slicing answer puts a day service with
// a night one on each of its 8 GPUs (the pairing whose worst hour is
// lowest), on SM-activity data (where MIG, as many GPUs, is chosen, and the
// time-slicing layout shown beside it) and on util-only data; every job is
// named as the job view names it.
func testDayPairs(t *testing.T) {
	t.Parallel()
	span := 24 * time.Hour
	dbs, origin := loadScenario(t, "planner-daypairs", span, 5*time.Minute, simload.Format{}, simload.Format{Stock: true, NoProf: true})
	for i, db := range dbs {
		p, err := Build(context.Background(), db, origin, origin.Add(span), Options{})
		if err != nil {
			t.Fatal(err)
		}
		pl := p.Pools[0]
		ts := pl.Layout
		if pl.Strategy == "mig" {
			ts = pl.TimeSliceLayout
		}
		t.Logf("stock %v: %s; strategy %s, time-slice %d, MIG %d", i == 1, p.Headline(), pl.Strategy, pl.TimeSliceGPUs, pl.MIGGPUs)
		if pl.Needed != 8 || pl.TimeSliceGPUs != 8 || len(ts) != 8 {
			t.Fatalf("needed %d, time-slice %d GPUs (%d laid out), want 8", pl.Needed, pl.TimeSliceGPUs, len(ts))
		}
		for k, g := range ts {
			var day, night int
			for j, job := range g.Jobs {
				switch {
				case strings.HasPrefix(job, "serving/day-"):
					day++
				case strings.HasPrefix(job, "serving/night-"):
					night++
				default:
					t.Errorf("GPU %d: job %q, want namespace/pod", k, job)
				}
				if !strings.HasPrefix(g.Devices[j], "inf-0") || !strings.Contains(g.Devices[j], "/GPU-") {
					t.Errorf("GPU %d: device %q, want host/UUID", k, g.Devices[j])
				}
			}
			if g.Mode != "time_slice" || day != 1 || night != 1 || g.P95Load > 0.6 {
				t.Errorf("time-sliced GPU %d: %s, jobs %v, worst hour %.2f; want a day and a night service, well under the 0.9 target", k, g.Mode, g.Jobs, g.P95Load)
			}
		}
	}
}
