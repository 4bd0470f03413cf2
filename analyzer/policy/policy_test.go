package policy

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

const tiered = `
dry_run: false
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

func TestEvaluate(t *testing.T) {
	p, err := Parse([]byte(tiered))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	base := func(mut func(f *finding.Finding)) *finding.Finding {
		f := &finding.Finding{Pattern: finding.CPUOnly, Job: "1", User: "bob", Team: "vision",
			Start: now.Add(-2 * time.Hour), End: now, WastedGPUHours: 4,
			Labels: map[string]string{LabelPartition: "dev", LabelQoS: "normal"}}
		if mut != nil {
			mut(f)
		}
		return f
	}
	cases := []struct {
		name                              string
		f                                 *finding.Finding
		at                                time.Time
		tier                              string
		exempt, qualifies, dry, reclaimOK bool
	}{
		{"dev qualifies", base(nil), now, "development", false, true, false, true},
		{"prod needs both fields", base(func(f *finding.Finding) { f.Labels[LabelPartition] = "prod" }), now, "best-effort", false, true, true, false},
		{"prod", base(func(f *finding.Finding) { f.Labels[LabelPartition], f.Labels[LabelQoS] = "prod", "high" }), now, "production", false, true, false, false},
		{"below wasted", base(func(f *finding.Finding) { f.WastedGPUHours = 0.5 }), now, "development", false, false, false, true},
		{"too short", base(func(f *finding.Finding) { f.Start = now.Add(-10 * time.Minute) }), now, "development", false, false, false, true},
		{"overlong early", base(func(f *finding.Finding) { f.Pattern = finding.Overlong }), now, "development", false, false, false, true},
		{"overlong late", base(func(f *finding.Finding) { f.Pattern, f.Start = finding.Overlong, now.Add(-49*time.Hour) }), now, "development", false, true, false, true},
		{"notebook rule forbids reclaim", base(func(f *finding.Finding) {
			f.Pattern, f.Namespace, f.Labels = finding.IdleSession, "nb-7", map[string]string{"app": "jupyter"}
		}), now, "notebooks", false, true, true, false},
		{"user exempt until", base(func(f *finding.Finding) { f.User = "alice" }), now, "development", true, true, false, true},
		{"user exemption expired", base(func(f *finding.Finding) { f.User = "alice" }), now.AddDate(0, 2, 0), "development", false, true, false, true},
		{"team glob", base(func(f *finding.Finding) { f.Team = "infra-ml" }), now, "development", true, true, false, true},
		{"job", base(func(f *finding.Finding) { f.Job = "77" }), now, "development", true, true, false, true},
		{"label true", base(func(f *finding.Finding) { f.Labels[ExemptKey] = "true" }), now, "development", true, true, false, true},
		{"label typo still exempts", base(func(f *finding.Finding) { f.Labels[ExemptKey] = "yes please" }), now, "development", true, true, false, true},
		{"label until future", base(func(f *finding.Finding) { f.Labels[ExemptKey] = "2026-05-02T00:00:00Z" }), now, "development", true, true, false, true},
		{"label until past", base(func(f *finding.Finding) { f.Labels[ExemptKey] = "2026-04-01T00:00:00Z" }), now, "development", false, true, false, true},
		{"label false", base(func(f *finding.Finding) { f.Labels[ExemptKey] = "false" }), now, "development", false, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := p.Evaluate(tc.f, tc.at)
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
