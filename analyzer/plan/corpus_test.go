package plan

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/forecast"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/schema"
)

// scenarioGPU is one GPU of a known-answer scenario: at minute m of the
// window, who holds it (job, "" for nobody), its SM activity and its
// framebuffer used (MiB).
type scenarioGPU struct {
	host string
	idx  int
	at   func(m int) (job string, sm, fb float64)
	// kind and user, when set, are published with the job on the
	// allocation info series, as gpuwatch's exporter does; user is a
	// function of the job, which may change hands.
	kind string
	user func(job string) string
}

// writeScenario writes the GPUs' series at 60 s into one TSDB block under
// dir, as dcgm-exporter with the profiling fields reports them, or (stock)
// as its default counters do: no SM activity, util in whole percent, the
// older Hostname label.
func writeScenario(t *testing.T, dir string, from time.Time, span time.Duration, gpus []scenarioGPU, stock bool) {
	t.Helper()
	w, err := tsdb.NewBlockWriter(slog.New(slog.NewTextHandler(io.Discard, nil)), dir, span.Milliseconds()+1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx := context.Background()
	app := w.Appender(ctx)
	refs := map[string]storage.SeriesRef{}
	hostLabel := schema.LabelHostname
	if stock {
		hostLabel = schema.LabelOldHost
	}
	add := func(g scenarioGPU, name, job string, ts int64, v float64) {
		key := name + g.host + strconv.Itoa(g.idx) + "|" + job
		b := labels.NewScratchBuilder(8)
		b.Add("__name__", name)
		b.Add(schema.LabelUUID, fmt.Sprintf("GPU-%s-%d", g.host, g.idx))
		b.Add(schema.LabelGPU, strconv.Itoa(g.idx))
		b.Add(hostLabel, g.host)
		b.Add(schema.LabelModelName, "NVIDIA H100 80GB HBM3")
		if job != "" {
			b.Add(schema.LabelHPCJob, job)
		}
		b.Sort()
		ref, err := app.Append(refs[key], b.Labels(), ts, v)
		if err != nil {
			t.Fatal(err)
		}
		refs[key] = ref
	}
	for m := 0; m < int(span/time.Minute); m++ {
		ts := from.Add(time.Duration(m) * time.Minute).UnixMilli()
		for _, g := range gpus {
			job, sm, fb := g.at(m)
			if !stock {
				add(g, schema.ProfSMActive.Name, job, ts, sm)
			}
			add(g, schema.GPUUtil.Name, job, ts, math.Round(100*sm))
			add(g, schema.FBUsed.Name, job, ts, fb)
			add(g, schema.FBFree.Name, job, ts, 81559-fb)
			if (g.kind != "" || g.user != nil) && job != "" {
				key := "info" + g.host + strconv.Itoa(g.idx) + job
				b := labels.NewScratchBuilder(8)
				b.Add("__name__", schema.AllocationInfo.Name)
				b.Add(schema.LabelUUID, fmt.Sprintf("GPU-%s-%d", g.host, g.idx))
				b.Add(schema.LabelGPU, strconv.Itoa(g.idx))
				b.Add(hostLabel, g.host)
				b.Add(schema.LabelJob, job)
				if g.kind != "" {
					b.Add(schema.LabelKind, g.kind)
				}
				if g.user != nil {
					b.Add(schema.LabelUser, g.user(job))
				}
				b.Sort()
				ref, err := app.Append(refs[key], b.Labels(), ts, 1)
				if err != nil {
					t.Fatal(err)
				}
				refs[key] = ref
			}
		}
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// nodeGroupsScenario: two node groups of one model. inf-01 and inf-02 run
// eight live light services (SM activity about 0.036, memory moving between
// 8,000 and 8,500 MiB): each fits a 1g.10gb slice, seven to a GPU, so MIG
// needs 2 GPUs and sharing needs 2 too (memory), and MIG wins the tie.
// train-01 and train-02 run six whole-GPU jobs (0.8, 60 GB), one pod that
// starts at 07:00 exactly, and one allocation that holds 3,000 MiB and
// never works (idle); the idle one shares a GPU with a job, so the group
// needs 7. Pooled by model alone, the two groups would be packed together.
func nodeGroupsScenario() []scenarioGPU {
	var gpus []scenarioGPU
	for h := 1; h <= 2; h++ {
		for i := 0; i < 4; i++ {
			k := (h-1)*4 + i
			gpus = append(gpus, scenarioGPU{host: fmt.Sprintf("inf-%02d", h), idx: i, at: func(m int) (string, float64, float64) {
				sm := 0.036 + 0.004*noise(k, m, 1)
				fb := 8250 + 250*math.Sin(2*math.Pi*float64(m)/240+float64(k))
				return "svc-" + strconv.Itoa(k), sm, math.Round(fb)
			}, user: func(string) string { return "svc" }})
		}
	}
	for h := 1; h <= 2; h++ {
		for i := 0; i < 4; i++ {
			k := (h-1)*4 + i
			at := func(m int) (string, float64, float64) {
				return "train-" + strconv.Itoa(k), 0.8 + 0.01*noise(k, m, 2), 60000
			}
			switch k {
			case 0:
				at = func(m int) (string, float64, float64) {
					if m < 7*60 {
						return "", 0, 0
					}
					return "pod-7am", 0.8 + 0.01*noise(k, m, 2), 60000
				}
			case 7:
				at = func(int) (string, float64, float64) { return "idle-1", 0, 3000 }
			}
			// One user's training: the idle allocation may share a GPU
			// with a job of its own user's.
			gpus = append(gpus, scenarioGPU{host: fmt.Sprintf("train-%02d", h), idx: i, at: at, user: func(string) string { return "trainer" }})
		}
	}
	return gpus
}

// notebooksScenario: 24 light notebooks (8,000 MiB, compute about 0.05) on
// 24 GPUs of one node group, notebook nb-k of user(k). Sharing needs 3 GPUs
// (eight notebooks' memory to a GPU), MIG 4 (seven 1g.10gb slices to a
// GPU).
func notebooksScenario(kind string, user func(k int) string) []scenarioGPU {
	var gpus []scenarioGPU
	for k := 0; k < 24; k++ {
		gpus = append(gpus, scenarioGPU{host: fmt.Sprintf("nb-%02d", k/8), idx: k % 8, kind: kind,
			user: func(string) string { return user(k) },
			at: func(m int) (string, float64, float64) {
				return "nb-" + strconv.Itoa(k), 0.045 + 0.005*noise(k, m, 3), 8000
			}})
	}
	return gpus
}

// notebookUser is the user of notebook nb-k: each its own, or one for all.
func notebookUser(oneUser bool) func(k int) string {
	if oneUser {
		return func(int) string { return "ann" }
	}
	return func(k int) string { return fmt.Sprintf("u%02d", k) }
}

// testCorpusThroughPrometheus holds the known answers of the scenarios
// built here, through a real Prometheus, on SM activity and on util-only
// (stock dcgm-exporter) data: pools by node group when no pool is given, a
// pod that starts on the hour absent from the hour before, live light
// services sized and not called idle, an unused allocation called idle.
func testCorpusThroughPrometheus(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC) // a Monday
	span := 24 * time.Hour
	for _, stock := range []bool{false, true} {
		t.Run(fmt.Sprintf("node-groups/stock=%v", stock), func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			writeScenario(t, data, from, span, nodeGroupsScenario(), stock)
			ps := startPrometheus(t, data)
			c, err := promapi.New(ps.URL, promapi.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(context.Background(), c, from, from.Add(span), Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s; pools by %v", p.Headline(), p.PoolsBy)
			if len(p.PoolsBy) != 1 || p.PoolsBy[0] != pools.ByNodeGroup {
				t.Errorf("pools by %v, want %s alone", p.PoolsBy, pools.ByNodeGroup)
			}
			want := map[string]struct {
				held, needed int
				strategy     string
			}{
				"H100 80GB HBM3/inf":   {8, 2, "mig"},
				"H100 80GB HBM3/train": {8, 7, "time_slice"},
			}
			if len(p.Pools) != len(want) {
				t.Fatalf("%d pools, want %d", len(p.Pools), len(want))
			}
			for _, pl := range p.Pools {
				w, ok := want[pl.Name]
				if !ok || pl.Held != w.held || pl.Needed != w.needed || pl.Strategy != w.strategy {
					t.Errorf("pool %s: held %d, needed %d, %s (time-slice %d, MIG %d); want %+v", pl.Name, pl.Held, pl.Needed,
						pl.Strategy, pl.TimeSliceGPUs, pl.MIGGPUs, w)
				}
				if pl.Name == "H100 80GB HBM3/train" && pl.Heat != nil {
					// Monday 06:00-07:00: six jobs and the idle one; the pod
					// that starts at 07:00 is not there yet.
					if got := pl.Heat.Allocated[6]; got != 7 {
						t.Errorf("allocated GPUs at Monday 06:00: %.2f, want 7", got)
					}
					if got := pl.Heat.Allocated[7]; got != 8 {
						t.Errorf("allocated GPUs at Monday 07:00: %.2f, want 8", got)
					}
				}
			}
			checkLayouts(t, p)
			for _, a := range p.Allocations {
				switch {
				case a.Job == "idle-1":
					if a.Recommendation != RecIdle {
						t.Errorf("%s: %s, want %s", a.Job, a.Recommendation, RecIdle)
					}
				case a.Pool == "H100 80GB HBM3/inf":
					if a.Recommendation != RecMIG || a.Profile != "1g.10gb" {
						t.Errorf("live light service %s: %s %s (compute %+v), want mig 1g.10gb", a.Job, a.Recommendation, a.Profile, a.Compute)
					}
				case a.Job == "pod-7am":
					// The pod on the hour.
					if a.HourOfWeek[6] != 0 || a.HourOfWeek[7] < 0.7 {
						t.Errorf("pod from 07:00: compute %.2f at 06:00 and %.2f at 07:00, want 0 and 0.8", a.HourOfWeek[6], a.HourOfWeek[7])
					}
					if a.Samples != 17*60 {
						t.Errorf("pod from 07:00: %.0f samples, want %d", a.Samples, 17*60)
					}
				}
			}
		})
	}
}

// notebookCase is one plan of the notebooks: its data, the operator's
// key, and the answer.
type notebookCase struct {
	kind        string
	oneUser     bool
	acrossUsers bool
	strategy    string
	needed, ts  int
}

// testNotebooksIsolation: time-slicing puts only one user's work on a
// GPU, so the 24 notebooks of 24 users are isolated by MIG (4 GPUs of
// 1g.10gb) whatever their kind, where mixing them would time-slice them
// onto 3 GPUs whose tenants share memory and faults; with the operator's
// --pool.time-slice-across-users that layout returns (for work not known to
// be interactive, which takes MIG whenever each session has a slice), and
// one user's 24 notebooks are time-sliced together on 3. Both answers are
// shown with what each gives up (24 slices on 4 GPUs strand 4), and each
// layout GPU says what its tenants share.
func testNotebooksIsolation(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC)
	span := 6 * time.Hour
	cases := []notebookCase{
		{kind: schema.KindInteractive, strategy: "mig", needed: 4, ts: 24},
		{kind: schema.KindInteractive, acrossUsers: true, strategy: "mig", needed: 4, ts: 3},
		{kind: schema.KindBatch, strategy: "mig", needed: 4, ts: 24},
		{kind: schema.KindBatch, acrossUsers: true, strategy: "time_slice", needed: 3, ts: 3},
		{kind: schema.KindBatch, oneUser: true, strategy: "time_slice", needed: 3, ts: 3},
	}
	for _, stock := range []bool{false, true} {
		for _, data := range []struct {
			kind    string
			oneUser bool
		}{{schema.KindInteractive, false}, {schema.KindBatch, false}, {schema.KindBatch, true}} {
			t.Run(fmt.Sprintf("%s/one-user=%v/stock=%v", data.kind, data.oneUser, stock), func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "data")
				writeScenario(t, dir, from, span, notebooksScenario(data.kind, notebookUser(data.oneUser)), stock)
				ps := startPrometheus(t, dir)
				q, err := promapi.New(ps.URL, promapi.Options{Timeout: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range cases {
					if c.kind != data.kind || c.oneUser != data.oneUser {
						continue
					}
					// Six hours of sessions: less than the default minimum history.
					p, err := Build(context.Background(), q, from, from.Add(span), Options{MinHistory: span, TimeSliceAcrossUsers: c.acrossUsers})
					if err != nil {
						t.Fatal(err)
					}
					checkNotebooksPlan(t, p, c)
				}
			})
		}
	}
}

// checkNotebooksPlan holds one plan of the notebooks to c's answer.
func checkNotebooksPlan(t *testing.T, p *Plan, c notebookCase) {
	t.Helper()
	if len(p.Pools) != 1 {
		t.Fatalf("%d pools, want 1", len(p.Pools))
	}
	pl := p.Pools[0]
	t.Logf("across users %v: %s: %s", c.acrossUsers, pl.Name, pl.Tradeoff)
	if pl.Strategy != c.strategy || pl.Needed != c.needed || pl.TimeSliceGPUs != c.ts || pl.MIGGPUs != 4 {
		t.Errorf("across users %v: %s on %d GPUs (time-slice %d, MIG %d), want %s on %d (%d and 4)", c.acrossUsers, pl.Strategy, pl.Needed,
			pl.TimeSliceGPUs, pl.MIGGPUs, c.strategy, c.needed, c.ts)
	}
	scope := "each user's work only with that user's own (the team's or namespace's where no user is known)"
	if c.acrossUsers {
		scope = "different users' work mixed (allowed by --pool.time-slice-across-users)"
	}
	if !strings.Contains(pl.Tradeoff, fmt.Sprintf("time-slicing: %d GPUs, %s", c.ts, scope)) || !strings.Contains(pl.Tradeoff, "MIG: 4 GPUs") ||
		!strings.Contains(pl.Tradeoff, "share memory and faults") || !strings.Contains(pl.Tradeoff, "memory and faults isolated") ||
		!strings.Contains(pl.Tradeoff, "4 compute slices stranded") {
		t.Errorf("tradeoff %q", pl.Tradeoff)
	}
	user := notebookUser(c.oneUser)
	for i, g := range pl.Layout {
		want := IsolatedMIG
		if g.Mode != "mig" {
			want = SharedTimeSlice
		}
		users := map[string]bool{}
		for _, job := range g.Jobs {
			k, _ := strconv.Atoi(strings.TrimPrefix(job, "nb-"))
			users[user(k)] = true
		}
		if g.Isolation != want || g.Mode != "mig" && len(users) > 1 && !c.acrossUsers {
			t.Errorf("GPU %d: %s, %q, jobs %v of %d users; want %q, one user's jobs where time-sliced", i, g.Mode, g.Isolation, g.Jobs, len(users), want)
		}
	}
	var out strings.Builder
	if err := Table(&out, p); err != nil {
		t.Fatal(err)
	}
	want := SharedTimeSlice
	if c.strategy == "mig" {
		want = IsolatedMIG
	}
	if !strings.Contains(out.String(), want) {
		t.Errorf("table does not say what the layout's tenants share (%q):\n%s", want, out.String())
	}
	checkLayouts(t, p)
}

// mondayPeakScenario: eight GPUs held by eight jobs the whole time (flat
// allocations) whose SM activity is 0.2, and 0.9 on Mondays 09:00-12:00:
// the demand peaks where the allocations do not move.
func mondayPeakScenario(from time.Time) []scenarioGPU {
	var gpus []scenarioGPU
	for k := 0; k < 8; k++ {
		gpus = append(gpus, scenarioGPU{host: "flat-01", idx: k, at: func(m int) (string, float64, float64) {
			at := from.Add(time.Duration(m) * time.Minute)
			sm, mem := 0.2, 40000.0
			if at.Weekday() == time.Monday && at.Hour() >= 9 && at.Hour() < 12 {
				sm, mem = 0.9, 70000
			}
			return "job-" + strconv.Itoa(k), sm + 0.01*noise(k, m, 4), mem
		}})
	}
	return gpus
}

// testMondayDemandPeak: from one week of history, the forecast of demand
// (seasonal naive) names Monday 09:00-12:00 as the peak at 7.2
// GPU-equivalents, 4.5 times the weekday level, while the allocations stay
// at 8; on the held-out second week its error is no worse than seasonal
// naive's (it is seasonal naive), and small. On SM activity and on
// util-only data, through a real Prometheus.
func testMondayDemandPeak(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 2, 2, 0, 0, 0, 0, time.UTC) // a Monday
	week := 7 * 24 * time.Hour
	for _, stock := range []bool{false, true} {
		t.Run(fmt.Sprintf("stock=%v", stock), func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			writeScenario(t, data, from, 2*week, mondayPeakScenario(from), stock)
			ps := startPrometheus(t, data)
			c, err := promapi.New(ps.URL, promapi.Options{Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			train, err := Build(context.Background(), c, from, from.Add(week), Options{})
			if err != nil {
				t.Fatal(err)
			}
			held, err := Build(context.Background(), c, from.Add(week), from.Add(2*week), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(train.Pools) != 1 || train.Pools[0].Forecast == nil || len(held.Pools) != 1 || held.Pools[0].Forecast == nil {
				t.Fatalf("no forecast from one week: %+v", train.Pools)
			}
			f := train.Pools[0].Forecast
			wantMeasure := "sm_active"
			if stock {
				wantMeasure = "util"
			}
			if f.Method != "seasonal_naive" || f.Weeks != 1 || f.Measure != wantMeasure {
				t.Errorf("forecast %s from %d weeks of %s, want seasonal_naive from 1 of %s", f.Method, f.Weeks, f.Measure, wantMeasure)
			}
			if len(f.Reserve) == 0 {
				t.Fatal("no peak named")
			}
			r := f.Reserve[0]
			t.Logf("%s; weekday level %.2f", r, f.WeekdayLevel)
			if r.From.Weekday() != time.Monday || r.From.Hour() != 9 || r.To.Hour() != 12 || math.Abs(r.GPUEquivalents-7.2) > 0.3 ||
				math.Abs(r.OfLevel-4.5) > 0.3 || r.GPUs != 8 {
				t.Errorf("peak %s (%.2f GPU-equivalents, %.2f× the level), want Monday 09:00–12:00 at 7.2, 4.5×, 8 GPUs allocated",
					r, r.GPUEquivalents, r.OfLevel)
			}
			// Memory peaks with the compute: 8 × 70,000 MiB = 547 GiB against
			// the weekday level of 8 × 40,000 MiB = 312.5 GiB.
			if m := f.Memory; m == nil || len(m.Peaks) == 0 {
				t.Errorf("no memory peak named: %+v", f.Memory)
			} else if p := m.Peaks[0]; p.From.Weekday() != time.Monday || p.From.Hour() != 9 || p.To.Hour() != 12 ||
				math.Abs(p.GiB-8*70000.0/1024) > 1 || math.Abs(p.OfLevel-1.75) > 0.02 || m.Method != "seasonal_naive" {
				t.Errorf("memory peak %s by %s, want Monday 09:00–12:00: 547 GiB, 1.8× the weekday level, by seasonal naive", p, m.Method)
			} else {
				t.Logf("memory: %s; weekday level %.1f GiB", p, m.WeekdayLevel)
			}
			for h, a := range f.NextAllocated {
				if a != 8 {
					t.Fatalf("allocated forecast at hour %d = %.2f, want a flat 8", h, a)
				}
			}
			// The held-out week's demand, hour by hour, is what a one-week
			// plan over it would carry forward.
			actual := held.Pools[0].Forecast.Next
			got := forecast.MAPE(actual, f.Next)
			t.Logf("held-out week: MAPE %.2f %% (the method is seasonal naive, so its error is naive's)", 100*got)
			if got > 0.05 {
				t.Errorf("held-out MAPE %.2f %%, want under 5 %%", 100*got)
			}
			if f.Memory != nil && held.Pools[0].Forecast.Memory != nil {
				got := forecast.MAPE(held.Pools[0].Forecast.Memory.Next, f.Memory.Next)
				t.Logf("held-out week, memory: MAPE %.2f %%", 100*got)
				if got > 0.05 {
					t.Errorf("held-out memory MAPE %.2f %%, want under 5 %%", 100*got)
				}
			}
		})
	}
}
