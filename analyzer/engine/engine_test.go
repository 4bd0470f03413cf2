package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

var base = time.Date(2026, 4, 6, 0, 0, 0, 0, time.UTC)

// synth is a hand-made fleet: n GPUs on host h, each held by job "j<i>"
// from the start, idle (cpu_only) when idle is true, else busy; samples
// every 30s in [0, until) except in the gaps.
type synth struct {
	host       string
	n          int
	idle       bool
	until      time.Duration
	gapFrom    time.Duration
	gapTo      time.Duration
	startAfter time.Duration
}

func (s synth) samples() []embedded.Sample {
	var out []embedded.Sample
	for off := time.Duration(0); off < s.until; off += 30 * time.Second {
		if off >= s.gapFrom && off < s.gapTo {
			continue
		}
		ts := base.Add(off)
		for i := 0; i < s.n; i++ {
			l := map[string]string{schema.LabelUUID: fmt.Sprintf("GPU-%s-%d", s.host, i), schema.LabelGPU: fmt.Sprint(i),
				schema.LabelHostname: s.host, schema.LabelModelName: "H100"}
			if off >= s.startAfter {
				l[schema.LabelHPCJob] = fmt.Sprintf("j%d", i)
			}
			util, fb, pw := 95.0, 40000.0, 600.0
			if s.idle {
				util, fb, pw = 0, 0, 70
			}
			add := func(m *schema.Metric, v float64) {
				ll := map[string]string{"__name__": m.Name}
				for k, v := range l {
					ll[k] = v
				}
				out = append(out, embedded.Sample{Labels: ll, T: ts, V: v})
			}
			add(schema.GPUUtil, util)
			add(schema.FBUsed, fb)
			add(schema.FBFree, 81920-fb)
			add(schema.PowerUsage, pw)
			add(schema.PowerLimit, 700)
		}
	}
	return out
}

func openSynth(t *testing.T, fleets ...synth) *embedded.DB {
	t.Helper()
	db, err := embedded.Open(t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for _, f := range fleets {
		if err := db.Appender().AppendSamples(context.Background(), f.samples()); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.TempDir() + "/state.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The number of queries per cycle does not depend on the fleet's size.
func TestCycleQueriesBounded(t *testing.T) {
	for _, n := range []int{2, 64} {
		db := openSynth(t, synth{host: "h", n: n, until: time.Hour, startAfter: 0})
		q := &query.Counting{Q: db}
		e, err := New(Options{Querier: q, Store: openStore(t), Config: config.Default()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Cycle(context.Background(), base.Add(30*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if res.Allocations != n || q.Count() != features.Queries || res.Queries != features.Queries {
			t.Errorf("%d GPUs: %d allocations, %d queries (reported %d), want %d and %d", n, res.Allocations, q.Count(), res.Queries, n, features.Queries)
		}
		// A second cycle within the same step has nothing new to read.
		if _, err := e.Cycle(context.Background(), base.Add(32*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if q.Count() != features.Queries {
			t.Errorf("a cycle with no new step issued %d queries", q.Count()-features.Queries)
		}
	}
}

// Cycles keep their state in the store: an engine rebuilt between cycles
// (a daemon restart) goes on where the last one stopped, finds cpu_only
// after two hours, writes usage, and turns unknown when data goes missing.
func TestCyclesAcrossRestarts(t *testing.T) {
	db := openSynth(t, synth{host: "h", n: 2, idle: true, until: 4 * time.Hour, startAfter: 10 * time.Minute,
		gapFrom: 3 * time.Hour, gapTo: 4 * time.Hour})
	// A busy reference node keeps reporting through the gap: the gap is
	// missing data on h, not a fleet-wide outage.
	ref := synth{host: "ref", n: 1, until: 4 * time.Hour}
	if err := db.Appender().AppendSamples(context.Background(), ref.samples()); err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	ctx := context.Background()
	var sawCPUOnly, sawUnknown bool
	for off := 5 * time.Minute; off <= 4*time.Hour; off += 5 * time.Minute {
		e, err := New(Options{Querier: db, Store: st, Config: config.Default()})
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Cycle(ctx, base.Add(off))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range res.Findings {
			if f.Pattern == schema.CPUOnly {
				if off < 2*time.Hour+10*time.Minute {
					t.Errorf("cpu_only at %s, before two hours of idleness", off)
				}
				if off > 3*time.Hour+5*time.Minute {
					t.Errorf("cpu_only at %s, during missing data", off)
				}
				sawCPUOnly = true
			}
		}
		if off > 3*time.Hour+5*time.Minute && len(res.Unknown) != 2 {
			t.Errorf("at %s: unknown = %v, want both jobs", off, res.Unknown)
		}
		sawUnknown = sawUnknown || len(res.Unknown) > 0
	}
	if !sawCPUOnly || !sawUnknown {
		t.Fatalf("cpu_only seen %v, unknown seen %v", sawCPUOnly, sawUnknown)
	}
	us, err := st.UsageBetween(ctx, base, base.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var alloc, active float64
	for _, u := range us {
		if u.Hostname == "h" {
			alloc += u.AllocatedGPUHours
			active += u.ActiveGPUHours
		}
	}
	// Two GPUs from 0:10 to 3:00 with data: 2 × 2h50m.
	if alloc < 5.5 || alloc > 5.8 || active != 0 {
		t.Errorf("usage: %.2f allocated, %.2f active GPU-hours; want ≈5.67 and 0", alloc, active)
	}
	fs, err := st.FindingsBetween(ctx, base, base.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 {
		t.Errorf("stored findings: %d, want cpu_only on both jobs", len(fs))
	}
}

// Faults of the Prometheus API give clear errors and never findings.
func TestPrometheusFaults(t *testing.T) {
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer func() { hang.CloseClientConnections(); hang.Close() }()
	partial := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"success","warnings":["store gateway unavailable: partial response"],
			"data":{"resultType":"matrix","result":[]}}`)
	}))
	defer partial.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"error","errorType":"internal","error":"boom"}`, http.StatusInternalServerError)
	}))
	defer broken.Close()
	unreachable := httptest.NewServer(http.NotFoundHandler())
	deadURL := unreachable.URL
	unreachable.Close()
	for _, c := range []struct {
		name, url, want string
	}{
		{"unreachable", deadURL, "connection refused"},
		{"timeout", hang.URL, "deadline exceeded"},
		{"partial response", partial.URL, "partial"},
		{"server error", broken.URL, "500"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := promapi.New(c.url, promapi.Options{Timeout: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			e, err := New(Options{Querier: q, Store: openStore(t), Config: config.Default()})
			if err != nil {
				t.Fatal(err)
			}
			fs, err := e.Analyze(context.Background(), base, base.Add(time.Hour))
			if err == nil || !strings.Contains(err.Error(), c.want) || len(fs) != 0 {
				t.Errorf("Analyze: %d findings, error %v; want an error containing %q", len(fs), err, c.want)
			}
			res, err := e.Cycle(context.Background(), base.Add(time.Hour))
			if err == nil || len(res.Findings) != 0 {
				t.Errorf("Cycle: %d findings, error %v; want an error", len(res.Findings), err)
			}
		})
	}
}

// Partial data: half of a node's series vanish. The affected jobs are
// unknown and get no reclaim-level finding; the others are judged.
func TestPartialDataIsUnknown(t *testing.T) {
	db := openSynth(t,
		synth{host: "ok", n: 2, idle: true, until: 3 * time.Hour},
		synth{host: "flaky", n: 2, idle: true, until: 3 * time.Hour, gapFrom: 2*time.Hour + 50*time.Minute, gapTo: 3 * time.Hour})
	e, err := New(Options{Querier: db, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	// The first step of the window is the allocation's first: its start
	// is unknown, so cpu_only needs no memory held, which holds here.
	fs, err := e.Analyze(context.Background(), base.Add(-5*time.Minute), base.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.Hostname == "flaky" && f.End.After(base.Add(2*time.Hour+50*time.Minute)) {
			t.Errorf("finding made on missing data: %+v", f)
		}
	}
	n := 0
	for _, f := range fs {
		if f.Hostname == "ok" && f.Pattern == schema.CPUOnly {
			n++
		}
	}
	if n != 2 {
		t.Errorf("healthy node: %d cpu_only findings, want 2 (%+v)", n, fs)
	}
}

// A fresh store's first cycle reads WarmUp of history in one fetch: jobs
// idle for hours are judged at once, not two hours after a (re)deployment.
func TestFirstCycleWarmUp(t *testing.T) {
	db := openSynth(t, synth{host: "h", n: 3, idle: true, until: 5 * time.Hour})
	q := &query.Counting{Q: db}
	e, err := New(Options{Querier: q, Store: openStore(t), Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Cycle(context.Background(), base.Add(4*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 24 || q.Count() != features.Queries {
		t.Errorf("first cycle read %d steps with %d queries, want 24 with %d", res.Steps, q.Count(), features.Queries)
	}
	n := 0
	for _, f := range res.Findings {
		if f.Pattern == schema.CPUOnly {
			n++
		}
	}
	if n != 3 {
		t.Errorf("first cycle: %d cpu_only findings, want 3 (%+v)", n, res.Findings)
	}
}
