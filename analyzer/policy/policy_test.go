package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

const tiered = `
dry_run: false
trust_workload_keys: {labels: [app], annotations: [gpuwatch.io/exempt]}
tiers:
  - name: production
    match: {partitions: [prod], qos: [high]}
    rules:
      - pattern: cpu_only
        steps: [{action: warn}]
  - name: development
    match: {partitions: ["dev*"]}
    reclaim: true
    max_run_time: 48h
    rules:
      - pattern: cpu_only
        min_wasted_gpu_hours: 1
        min_duration: 30m
        steps: [{action: warn}, {action: reclaim, after: 1h}]
      - pattern: overlong
        steps: [{action: warn}, {action: checkpoint}]
  - name: notebooks
    match: {namespaces: [nb-*], labels: {app: jupyter}}
    reclaim: true
    dry_run: true
    rules:
      - pattern: idle_session
        reclaim: false
        steps: [{action: warn}, {action: reclaim}]
  - name: best-effort
    rules:
      - pattern: cpu_only
        dry_run: true
        steps: [{action: warn}]
exemptions:
  - {user: alice, until: "2026-06-01T00:00:00Z"}
  - {team: "infra*"}
  - {job: "77", reason: benchmark}
`

func slurmFacts(partition, qos, user, team string) *facts.Facts {
	return factsOf(schema.SchedulerSlurm, map[schema.Attr]string{schema.AttrPartition: partition, schema.AttrQoS: qos,
		schema.AttrUser: user, schema.AttrTeam: team, schema.AttrAccount: "acct", schema.AttrJobName: "train", schema.AttrKind: "batch"}, nil)
}

func kubeFacts(ns string, labels, annotations map[string]string) *facts.Facts {
	return factsOf(schema.SchedulerKubernetes, map[schema.Attr]string{schema.AttrNamespace: ns, schema.AttrTeam: "vision", schema.AttrKind: "interactive"},
		map[schema.Attr]map[string]string{schema.AttrPodLabels: labels, schema.AttrPodAnnotations: annotations, schema.AttrNamespaceLabels: {}})
}

// factsOf builds the facts an owner reports: these values and maps, nothing else.
func factsOf(scheduler string, values map[schema.Attr]string, maps map[schema.Attr]map[string]string) *facts.Facts {
	f := &facts.Facts{Scheduler: scheduler}
	for a, v := range values {
		f.Set(a, v)
	}
	for a, m := range maps {
		f.SetMap(a, m)
	}
	return f
}

func TestEvaluate(t *testing.T) {
	p, err := Parse([]byte(tiered))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	base := func(mut func(f *finding.Finding)) *finding.Finding {
		f := &finding.Finding{Pattern: schema.CPUOnly, Job: "1", User: "bob", Team: "vision", Scheduler: "slurm",
			Start: now.Add(-2 * time.Hour), End: now, WastedGPUHours: 4}
		if mut != nil {
			mut(f)
		}
		return f
	}
	dev := slurmFacts("dev", "normal", "bob", "vision")
	idle := func(f *finding.Finding) {
		f.Pattern, f.Scheduler, f.Namespace, f.Pod, f.Job = schema.IdleSession, "kubernetes", "nb-7", "p", "nb-7/p"
	}
	annotated := func(v string) *facts.Facts {
		return kubeFacts("nb-7", map[string]string{"app": "jupyter"}, map[string]string{schema.ExemptKey: v})
	}
	cases := []struct {
		name                              string
		f                                 *finding.Finding
		fa                                *facts.Facts
		at                                time.Time
		tier                              string
		exempt, qualifies, dry, reclaimOK bool
	}{
		{"dev qualifies", base(nil), dev, now, "development", false, true, false, true},
		{"prod needs both fields", base(nil), slurmFacts("prod", "normal", "bob", "vision"), now, "best-effort", false, true, true, false},
		{"prod", base(nil), slurmFacts("prod", "high", "bob", "vision"), now, "production", false, true, false, false},
		{"below wasted", base(func(f *finding.Finding) { f.WastedGPUHours = 0.5 }), dev, now, "development", false, false, false, true},
		{"too short", base(func(f *finding.Finding) { f.Start = now.Add(-10 * time.Minute) }), dev, now, "development", false, false, false, true},
		{"overlong early", base(func(f *finding.Finding) { f.Pattern = schema.Overlong }), dev, now, "development", false, false, false, true},
		{"overlong late", base(func(f *finding.Finding) { f.Pattern, f.Start = schema.Overlong, now.Add(-49*time.Hour) }), dev, now, "development", false, true, false, true},
		{"notebook rule forbids reclaim", base(idle), kubeFacts("nb-7", map[string]string{"app": "jupyter"}, nil), now, "notebooks", false, true, true, false},
		{"user exempt until", base(nil), slurmFacts("dev", "normal", "alice", "vision"), now, "development", true, true, false, true},
		{"user exemption expired", base(nil), slurmFacts("dev", "normal", "alice", "vision"), now.AddDate(0, 2, 0), "development", false, true, false, true},
		{"team glob", base(nil), slurmFacts("dev", "normal", "bob", "infra-ml"), now, "development", true, true, false, true},
		{"the telemetry's user is not the owner's", base(func(f *finding.Finding) { f.User = "alice" }), dev, now, "development", false, true, false, true},
		{"job", base(func(f *finding.Finding) { f.Job = "77" }), dev, now, "development", true, true, false, true},
		{"annotation true", base(idle), annotated("true"), now, "notebooks", true, true, true, false},
		{"annotation typo still exempts", base(idle), annotated("yes please"), now, "notebooks", true, true, true, false},
		{"annotation until future", base(idle), annotated("2026-05-02T00:00:00Z"), now, "notebooks", true, true, true, false},
		{"annotation until past", base(idle), annotated("2026-04-01T00:00:00Z"), now, "notebooks", false, true, true, false},
		{"annotation false", base(idle), annotated("false"), now, "notebooks", false, true, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := p.Evaluate(tc.f, tc.fa, tc.at)
			if ev.Missing != "" {
				t.Fatalf("missing %s", ev.Missing)
			}
			if ev.Tier == nil || ev.Tier.Name != tc.tier {
				t.Fatalf("tier = %+v, want %s", ev.Tier, tc.tier)
			}
			if ev.Exempt != tc.exempt || ev.Qualifies != tc.qualifies || ev.DryRun != tc.dry || ev.ReclaimAllowed != tc.reclaimOK {
				t.Errorf("got exempt=%v qualifies=%v (%s) dry=%v reclaim=%v; want %v %v %v %v",
					ev.Exempt, ev.Qualifies, ev.Why, ev.DryRun, ev.ReclaimAllowed, tc.exempt, tc.qualifies, tc.dry, tc.reclaimOK)
			}
		})
	}
}

// TestMissingFactsNeverFallThrough: when the owner cannot say what a tier
// needs, the finding gets no tier (never the catch-all), at most the notify
// steps of the undecided tier, and the reason names the fact.
func TestMissingFactsNeverFallThrough(t *testing.T) {
	p, err := Parse([]byte(`
tiers:
  - name: production
    match: {partitions: [prod]}
    rules:
      - pattern: cpu_only
        steps: [{action: notify}, {action: warn, after: 1h}]
  - name: dev
    match: {partitions: [dev]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn}, {action: reclaim, after: 1h}]
  - name: everything-else
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn}, {action: reclaim, after: 1h}]
exemptions:
  - {team: ml-infra}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &finding.Finding{Pattern: schema.CPUOnly, Job: "1", Scheduler: "slurm", Start: now.Add(-3 * time.Hour), End: now, WastedGPUHours: 4}
	down := &facts.Facts{Scheduler: schema.SchedulerSlurm}
	down.MarkMissing("squeue --json: connection refused")
	noTeam := factsOf(schema.SchedulerSlurm, map[schema.Attr]string{schema.AttrPartition: "dev", schema.AttrQoS: "normal",
		schema.AttrUser: "bob", schema.AttrAccount: "acct", schema.AttrJobName: "train", schema.AttrKind: "batch"}, nil)
	noTeam.Missing = map[schema.Attr]string{schema.AttrTeam: "no teams file given to the analyzer"}
	for _, tc := range []struct {
		name, want string
		fa         *facts.Facts
	}{
		{"scheduler down", "partition: squeue --json: connection refused", down},
		{"no facts looked up", "partition: no facts were looked up", nil},
		{"exemption undecidable", "team: no teams file", noTeam},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := p.Evaluate(f, tc.fa, now)
			if ev.Tier != nil || ev.ReclaimAllowed || !strings.Contains(ev.Missing, tc.want) {
				t.Fatalf("tier=%v reclaim=%v missing=%q; want no tier and missing %q", ev.Tier, ev.ReclaimAllowed, ev.Missing, tc.want)
			}
			if ev.Rule != nil {
				for _, s := range ev.Rule.Steps {
					if s.Action != StepNotify {
						t.Fatalf("step %s runs without facts", s.Action)
					}
				}
			}
		})
	}
	// A known fact that rules a tier out still decides: a dev job with the
	// QoS unknown is not held back by a tier it cannot be in.
	known := slurmFacts("dev", "normal", "bob", "vision")
	if ev := p.Evaluate(f, known, now); ev.Tier == nil || ev.Tier.Name != "dev" || ev.Missing != "" {
		t.Fatalf("known facts: tier %v missing %q", ev.Tier, ev.Missing)
	}
}

func TestChannelsFor(t *testing.T) {
	p, err := Parse([]byte("channels:\n  alertmanager: {url: 'http://am:9093/'}\n" + minimal))
	if err != nil {
		t.Fatal(err)
	}
	got := p.ChannelsFor(Step{Action: StepWarn})
	if len(got) != 1 || got[0] != ChannelAlertmanager {
		t.Errorf("warn channels = %v, want only the configured alertmanager", got)
	}
	if got := p.ChannelsFor(Step{Action: StepNotify}); len(got) != 1 || got[0] != ChannelAlertmanager {
		t.Errorf("notify without its default webhook = %v, want the configured alertmanager", got)
	}
	if p.Channels.AlertmanagerURL != "http://am:9093" {
		t.Errorf("url = %q", p.Channels.AlertmanagerURL)
	}
}
