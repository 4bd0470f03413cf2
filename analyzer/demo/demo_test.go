package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/schema"
)

// origin is a Monday, so the small scenario's span starts a report week.
var origin = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)

func smallScenarioB() (*sim.Scenario, error) {
	return sim.LoadScenario(filepath.Join("testdata", "demo-small.yaml"))
}

func smallScenario(t *testing.T) *sim.Scenario {
	t.Helper()
	sc, err := smallScenarioB()
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func teamsOf(sc *sim.Scenario) map[string]bool {
	teams := map[string]bool{}
	for _, e := range sc.Expectations() {
		if e.Team != "" {
			teams[e.Team] = true
		}
	}
	return teams
}

// TestSimulateWritesEverything runs the small fleet through 30 simulated
// hours and checks every output the demo promises.
func TestSimulateWritesEverything(t *testing.T) {
	t.Parallel()
	sc := smallScenario(t)
	out := t.TempDir()
	// A stale file from an earlier run must not survive.
	if err := os.WriteFile(filepath.Join(out, "findings.json"), []byte("stale"), 0o644); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	d, err := New(Options{Scenario: sc, Seed: 1, Length: 30 * time.Hour, Origin: origin, Out: out, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	res, err := d.Simulate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := 30 * 120; res.Collections != want {
		t.Errorf("collections = %d, want %d (every 30s step of (origin, origin+30h])", res.Collections, want)
	}
	if want := 30 * 12; res.Cycles != want {
		t.Errorf("cycles = %d, want %d (every 5m analyzer step)", res.Cycles, want)
	}
	if n := strings.Count(progress.String(), "\n"); n < 2 || n > 5 {
		t.Errorf("non-terminal progress wrote %d lines, want a few:\n%s", n, progress.String())
	}

	var doc struct {
		Findings []finding.Finding `json:"findings"`
	}
	readJSON(t, filepath.Join(out, "findings.json"), &doc)
	got := map[schema.Pattern]bool{}
	for _, f := range doc.Findings {
		got[f.Pattern] = true
		switch {
		case f.Pattern.Health():
			// Health findings (what slowed or ended a job) are never waste.
			if f.WastedGPUHours != 0 {
				t.Errorf("health finding %s wastes %.2f GPU-hours", f.Key(), f.WastedGPUHours)
			}
		case f.Pattern == schema.Overlong && f.Evidence["over_limit_gpu_hours"] <= 0:
			t.Errorf("finding %s is %.2f GPU-hours over the limit", f.Key(), f.Evidence["over_limit_gpu_hours"])
		case f.Pattern != schema.Overlong && f.WastedGPUHours <= 0:
			t.Errorf("finding %s wastes %.2f GPU-hours", f.Key(), f.WastedGPUHours)
		}
	}
	for _, p := range schema.Patterns {
		if !got[p] {
			t.Errorf("findings.json has no %s finding", p)
		}
	}

	for team := range teamsOf(sc) {
		body := readFile(t, filepath.Join(out, "reports", team+".html"))
		if !strings.Contains(body, "<html") || !strings.Contains(body, team) {
			t.Errorf("reports/%s.html is not the team's HTML report", team)
		}
	}
	fleet := readFile(t, filepath.Join(out, "reports", "fleet.html"))
	if !strings.Contains(fleet, "<html") {
		t.Error("reports/fleet.html is not HTML")
	}
	// The week before the simulated one had no usage: none may leak there.
	if !strings.Contains(fleet, "no usage in") || strings.Contains(fleet, "points from") {
		i := strings.Index(fleet, "from 20")
		t.Errorf("the fleet report compares with a previous week that had no usage: %q", fleet[max(0, i-80):min(len(fleet), i+80)])
	}
	// Reports, findings and the store name users, jobs and recipients: none
	// is readable by others (dashboards, generated JSON, may be).
	reports, _ := filepath.Glob(filepath.Join(out, "reports", "*"))
	for _, f := range append(reports, filepath.Join(out, "gpuwatch.db"), filepath.Join(out, "findings.json")) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s mode %v: readable by others", f, fi.Mode().Perm())
		}
	}
	if len(res.Teams) != len(teamsOf(sc)) {
		t.Errorf("reported teams %v, want %v", res.Teams, teamsOf(sc))
	}
	if tot := res.Fleet.Totals; tot.AllocatedGPUHours <= 0 || tot.WastedGPUHours <= 0 || tot.ActiveGPUHours+tot.WastedGPUHours > tot.AllocatedGPUHours+1e-9 {
		t.Errorf("fleet totals: allocated %.1f, used %.1f, wasted %.1f", tot.AllocatedGPUHours, tot.ActiveGPUHours, tot.WastedGPUHours)
	}

	for _, s := range dashboards.All() {
		var dash map[string]any
		readJSON(t, filepath.Join(out, "dashboards", filepath.Base(s.File)), &dash)
		if dash["panels"] == nil {
			t.Errorf("dashboard %s has no panels", s.File)
		}
	}

	var evs []audit.Event
	readJSON(t, filepath.Join(out, "audit.json"), &evs)
	steps := map[string]int{}
	for _, e := range evs {
		if !e.DryRun && e.Actuator != "policy" {
			t.Errorf("audit event not in dry-run: %+v", e)
		}
		steps[e.Step+" "+string(e.State)]++
	}
	for _, want := range []string{"notify done", "warn done", "reclaim dry_run", "checkpoint dry_run"} {
		if steps[want] == 0 {
			t.Errorf("audit.json has no %q step; has %v", want, steps)
		}
	}
	if res.Notifications == 0 {
		t.Error("no notification recorded")
	}
	if _, err := os.Stat(filepath.Join(out, "gpuwatch.db")); err != nil {
		t.Errorf("state store: %v", err)
	}

	var sum bytes.Buffer
	if err := WriteSummary(&sum, res); err != nil {
		t.Fatal(err)
	}
	for _, p := range schema.Patterns {
		if !strings.Contains(sum.String(), string(p)) {
			t.Errorf("summary lacks pattern %s:\n%s", p, sum.String())
		}
	}
	if !strings.Contains(sum.String(), "WOULD RECLAIM") {
		t.Errorf("summary lacks the dry-run reclaims:\n%s", sum.String())
	}
	// The capacity plan of the simulated span: in plan.json, the summary
	// and the fleet report, with the same figures.
	var pl struct {
		Held   int `json:"gpus_held"`
		Needed int `json:"gpus_needed"`
	}
	readJSON(t, filepath.Join(out, "plan.json"), &pl)
	if pl.Held == 0 || pl.Needed == 0 || pl.Needed > pl.Held+res.Plan.Unknown {
		t.Errorf("plan.json: held %d, needed %d", pl.Held, pl.Needed)
	}
	if !strings.Contains(sum.String(), "CAPACITY PLAN "+res.Plan.Headline()) {
		t.Errorf("summary lacks the capacity plan:\n%s", sum.String())
	}
	if body := readFile(t, filepath.Join(out, "reports", "fleet.html")); !strings.Contains(body, fmt.Sprintf("<b>%d</b> GPUs held, <b>%d</b> needed", pl.Held, pl.Needed)) {
		t.Error("reports/fleet.html lacks the plan's figures")
	}
}

// TestRunServes starts the demo's server mode, fetches the live exporter's
// /metrics and the analyzer page, and stops it by cancelling.
func TestRunServes(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	noFile, noSystemd := "", false
	var summary bytes.Buffer // read once Run has returned
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, RunOptions{
			Options:  Options{Scenario: smallScenario(t), Seed: 1, Length: 3 * time.Hour, Origin: origin, Out: t.TempDir()},
			Web:      &web.FlagConfig{WebListenAddresses: &[]string{}, WebSystemdSocket: &noSystemd, WebConfigFile: &noFile},
			Listener: l, Stdout: &summary,
		})
	}()
	base := "http://" + l.Addr().String()
	// Connections wait in the listener's backlog until the simulation is
	// done and the server starts.
	client := &http.Client{Timeout: 5 * time.Minute} // the simulation runs first: minutes under -race on a busy machine
	get := func(path string) string {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
		}
		return string(body)
	}
	metrics := get("/metrics")
	for _, want := range []string{schema.GPUUtil.Name, `hostname="a100-01"`, `hostname="h100-01"`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if node := get("/nodes/h100-01/metrics"); !strings.Contains(node, `hostname="h100-01"`) || strings.Contains(node, `hostname="a100-01"`) {
		t.Error("/nodes/h100-01/metrics is not that node's exposition")
	}
	page := get("/")
	for _, want := range []string{"pretrain-kevin", "over_requested"} {
		if !strings.Contains(page, want) {
			t.Errorf("analyzer page lacks %q", want)
		}
	}
	get("/audit")
	// Three simulated hours are less history than the capacity plan needs:
	// the planner page says so (and when to ask again), the demo goes on.
	if pl := get("/planner"); !strings.Contains(pl, "not enough history to plan: 3 h of hourly data") || !strings.Contains(pl, "plan again after") {
		t.Error("the planner page does not say why a 3 h span has no plan")
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop after cancel")
	}
	if !strings.Contains(summary.String(), "\nCAPACITY PLAN none: not enough history to plan: 3 h of hourly data") {
		t.Errorf("the summary does not say why there is no plan:\n%s", summary.String())
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"no output folder", Options{}, "output folder"},
		{"step too coarse", Options{Step: 5 * time.Minute}, "half the analyzer step"},
		{"sub-second step", Options{Step: time.Millisecond}, "shorter than a second"},
		{"too short", Options{Length: time.Minute}, "shorter than the analyzer step"},
		{"cycle not a multiple", Options{CycleEvery: 7 * time.Minute}, "multiple of the analyzer step"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "no output folder" {
				tc.o.Out = t.TempDir()
			}
			_, err := New(tc.o)
			var ue *clikit.UsageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a usage error with %q", err, tc.want)
			}
		})
	}
}

// TestPolicyAlwaysDryRun: a policy written to act for real is run in dry-run
// by the demo.
func TestPolicyAlwaysDryRun(t *testing.T) {
	p, err := policy.Parse([]byte(`
dry_run: false
tiers:
  - name: all
    reclaim: true
    rules:
      - pattern: orphan_process
        steps: [{action: warn}, {action: reclaim, after: 30m}]
`))
	if err != nil {
		t.Fatal(err)
	}
	f := &finding.Finding{Pattern: schema.OrphanProcess, Job: "1", Hostname: "n", Start: origin, End: origin.Add(time.Hour), WastedGPUHours: 5}
	if ev := p.Evaluate(f, nil, origin.Add(time.Hour)); ev.DryRun || ev.Tier == nil {
		t.Fatalf("the policy does not act for real: %+v", ev)
	}
	forceDryRun(p)
	if ev := p.Evaluate(f, nil, origin.Add(time.Hour)); !ev.DryRun {
		t.Error("forced policy still acts for real")
	}
}

func TestLastWeek(t *testing.T) {
	for _, tc := range []struct{ now, want string }{
		{"2026-11-29T18:00:00Z", "2026-11-16T00:00:00Z"}, // Sunday
		{"2026-11-30T00:00:00Z", "2026-11-23T00:00:00Z"}, // Monday midnight
		{"2026-12-02T23:59:00-05:00", "2026-11-23T00:00:00Z"},
	} {
		now, _ := time.Parse(time.RFC3339, tc.now)
		if got := lastWeek(now).Format(time.RFC3339); got != tc.want {
			t.Errorf("lastWeek(%s) = %s, want %s", tc.now, got, tc.want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(readFile(t, path)), v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestRunInterrupted: cancelling during the simulation stops it quietly.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := Run(ctx, RunOptions{Options: Options{Scenario: smallScenario(t), Length: 6 * time.Hour, Origin: origin, Out: t.TempDir()}, Stdout: &out})
	if err != nil || out.Len() != 0 {
		t.Errorf("Run on a cancelled context: err %v, output %q; want nil and no summary", err, out.String())
	}
}
