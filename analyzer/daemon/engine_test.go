package daemon

import (
	"cmp"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// Four Slurm jobs on one node: an idle one in the development tier, a
// training one, an idle one of an exempt user, and an idle one in the
// production tier (no reclaim).
const engineScenario = `
name: reclaim
origin: 2026-03-02T00:00:00Z
fleet:
  - hostname: node-a
    model: A100-SXM4-80GB
    gpus: 4
workloads:
  - {id: "8001", user: bob, account: dev-vision, node: node-a, gpus: [0], start: 0s, duration: 10h, behaviour: cpu_only}
  - {id: "8002", user: alice, account: dev-vision, node: node-a, gpus: [1], start: 0s, duration: 10h, behaviour: training}
  - {id: "8003", user: carol, account: dev-nlp, node: node-a, gpus: [2], start: 0s, duration: 10h, behaviour: cpu_only}
  - {id: "8004", user: dan, account: prod-search, node: node-a, gpus: [3], start: 0s, duration: 10h, behaviour: cpu_only}
`

const enginePolicy = `
dry_run: false
min_warning: 30m
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: production
    match: {accounts: [prod-*]}
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 1h}]
  - name: development
    match: {accounts: [dev-*]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: warn, after: 0s}
          - {action: checkpoint, after: 1h}
          - {action: reclaim, after: 3h}
exemptions:
  - {user: carol}
`

// The engine over simulated telemetry feeds the escalation: only the idle
// development job is signalled and cancelled, on the policy's delays. When
// the telemetry stops between the checkpoint and the reclaim, the job is
// unknown and is not cancelled on the strength of older evidence.
func TestEngineFindingsEscalate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("replays 5.5 simulated hours")
	}
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name                    string
		gapFrom, gapTo          time.Duration
		checkpointAt, reclaimAt time.Duration // 0: never
		every                   time.Duration // the schedule; 0: one cycle a step (5m)
	}{
		// cpu_only is found after 2h of evidence: warn at 2h, checkpoint 1h
		// later, reclaim 3h later.
		{"steady telemetry", 0, 0, 3 * time.Hour, 5 * time.Hour, 0},
		{"telemetry gap before the reclaim", 3*time.Hour + 20*time.Minute, 3*time.Hour + 40*time.Minute, 3 * time.Hour, 0, 0},
		// Scheduled three times a step: the cycles between steps judge
		// nothing and end no episode, so the ladder climbs as above
		// instead of restarting at its warning.
		{"cycles between steps", 0, 0, 3 * time.Hour, 5 * time.Hour, 100 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, d := engineRig(t, origin, tc.gapFrom, tc.gapTo)
			var checkpointAt, reclaimAt time.Duration
			every := cmp.Or(tc.every, 5*time.Minute)
			for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5*time.Hour + 30*time.Minute)); now = now.Add(every) {
				d.Now = func() time.Time { return now }
				if _, err := d.RunOnce(context.Background()); err != nil {
					t.Fatalf("cycle at %s: %v", now.Sub(origin), err)
				}
				if checkpointAt == 0 && r.slurm.count("checkpoint") > 0 {
					checkpointAt = now.Sub(origin)
				}
				if reclaimAt == 0 && r.slurm.count("reclaim") > 0 {
					reclaimAt = now.Sub(origin)
					r.slurm.stopped["8001"] = true
				}
			}
			if checkpointAt != tc.checkpointAt || reclaimAt != tc.reclaimAt {
				t.Fatalf("checkpoint at %s, reclaim at %s; want %s, %s (calls %v)", checkpointAt, reclaimAt,
					tc.checkpointAt, tc.reclaimAt, r.slurm.calls)
			}
			for _, c := range r.slurm.calls {
				if !strings.HasSuffix(c, " 8001") {
					t.Errorf("acted on another job: %s", c)
				}
			}
			evs, err := r.log.Events(context.Background(), audit.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			warned := 0
			for _, e := range evs {
				seen[e.Job+" "+e.Step+" "+string(e.State)] = true
				if e.Job == "8001" && e.Step == "warn" && e.State == audit.Done {
					warned++
				}
				if e.Job == "8002" {
					t.Errorf("the training job was escalated: %+v", e)
				}
			}
			for _, want := range []string{"8001 warn done", "8001 checkpoint done", "8003 exempt skipped", "8004 warn done"} {
				if !seen[want] {
					t.Errorf("audit lacks %q", want)
				}
			}
			// The detector's cpu_only episode goes on after a gap (the gap
			// pauses its clock), but the escalator ends the escalation
			// episode of a finding absent from a cycle (audit.EndEpisodes),
			// so the job is warned again after the gap and its ladder
			// starts over: never reclaimed on the evidence from before it.
			wantWarns := 1
			if tc.gapTo > tc.gapFrom {
				wantWarns = 2
			}
			if warned != wantWarns {
				t.Errorf("job 8001 warned %d times, want %d", warned, wantWarns)
			}
		})
	}
}

func engineRig(t *testing.T, origin time.Time, gapFrom, gapTo time.Duration) (*rig, *Daemon) {
	t.Helper()
	return engineRigFor(t, engineScenario, origin, gapFrom, gapTo)
}

// engineRigFor replays scenario into an embedded TSDB (leaving out
// [gapFrom, gapTo), and passing each scrape through relabel, as a
// Prometheus' relabelling or external labels would) and wires an engine
// over it to an escalator.
func engineRigFor(t *testing.T, scenario string, origin time.Time, gapFrom, gapTo time.Duration, relabel ...func([]*dto.MetricFamily)) (*rig, *Daemon) {
	t.Helper()
	var shape func(simload.Sink) simload.Sink
	if len(relabel) > 0 {
		shape = func(next simload.Sink) simload.Sink {
			return func(ts time.Time, f []*dto.MetricFamily) error {
				for _, rl := range relabel {
					rl(f)
				}
				return next(ts, f)
			}
		}
	}
	return engineRigShaped(t, scenario, origin, gapFrom, gapTo, shape)
}

// engineRigShaped is engineRigFor with the replayed series passed through
// shape (nil: as gpuwatch's exporter publishes them), as another
// exporter or scrape would publish them.
func engineRigShaped(t *testing.T, scenario string, origin time.Time, gapFrom, gapTo time.Duration, shape func(simload.Sink) simload.Sink) (*rig, *Daemon) {
	t.Helper()
	sc, err := sim.ParseScenario("reclaim.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	app := db.Appender()
	var sink simload.Sink = func(ts time.Time, f []*dto.MetricFamily) error {
		if off := ts.Sub(origin); off >= gapFrom && off < gapTo {
			return nil // the exporter was down
		}
		return app.AppendFamilies(ctx, ts, f)
	}
	if shape != nil {
		sink = shape(sink)
	}
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 7, Origin: origin, To: 5*time.Hour + 30*time.Minute, Resolution: 30 * time.Second},
		sink); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Querier: db, Store: st, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, enginePolicy, st)
	r.esc.Facts = &facts.Resolver{Sources: simload.FactSources(sc, origin)}
	return r, &Daemon{Source: EngineSource{Engine: eng, Series: db}, Escalator: r.esc}
}
