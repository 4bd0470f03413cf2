package policy

import (
	"strings"
	"testing"
	"time"
)

const minimal = `
tiers:
  - name: dev
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: warn, after: 0s}
          - {action: reclaim, after: 1h}
`

func TestParseDefaults(t *testing.T) {
	p, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if !p.DryRun || p.MinWarning != DefaultMinWarning || p.StaleAfter != DefaultStaleAfter ||
		p.RateLimits.ReclaimsPerCycle != DefaultReclaimsPerCycle || p.RateLimits.ReclaimsPerHour != DefaultReclaimsPerHour ||
		p.Kubernetes.Reclaim != KubeEvict || p.CheckpointSignal != "USR1" || p.ProcessGrace != DefaultProcessGrace {
		t.Errorf("defaults not applied: %+v", p)
	}
	if got := p.Tiers[0].Rules[0].Steps[1]; got.Action != StepReclaim || got.After != time.Hour {
		t.Errorf("step = %+v", got)
	}
}

func TestExamplePolicyParses(t *testing.T) {
	p, err := LoadFile("../../deploy/examples/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tiers) < 3 {
		t.Errorf("example has %d tiers, want >= 3", len(p.Tiers))
	}
	if !p.DryRun {
		t.Error("example must keep dry-run on")
	}
}

// Every bad policy must be refused with a message naming the key and line.
func TestParseErrorsNameKeyAndLine(t *testing.T) {
	cases := []struct {
		name, doc, want string
	}{
		{"unknown top key", "dry_rn: true\n" + minimal, `line 1: dry_rn: unknown key "dry_rn"`},
		{"unknown tier key", "tiers:\n  - name: a\n    reclam: true\n", `line 3: tiers[0].reclam: unknown key "reclam"`},
		{"unknown step key", minimal + "          - {action: notify, aftr: 1s}\n", `line 10: tiers[0].rules[0].steps[2].aftr: unknown key "aftr"`},
		{"bool type", "dry_run: maybe\n" + minimal, "line 1: dry_run: cannot unmarshal"},
		{"int type", "rate_limits:\n  reclaims_per_hour: lots\n" + minimal, "line 2: rate_limits.reclaims_per_hour: cannot unmarshal"},
		{"negative rate", "rate_limits:\n  reclaims_per_cycle: -1\n" + minimal, "line 2: rate_limits.reclaims_per_cycle: must be zero or more"},
		{"bad min_warning", "min_warning: soon\n" + minimal, `line 1: min_warning: invalid duration "soon"`},
		{"infinite hours", "tiers:\n  - name: t\n    rules:\n      - pattern: cpu_only\n        min_wasted_gpu_hours: .inf\n        steps: [{action: notify}]\n", "min_wasted_gpu_hours: must be zero or more and finite"},
		{"negative duration", "min_warning: -5m\n" + minimal, "line 1: min_warning: duration \"-5m\" must not be negative"},
		{"zero stale", "stale_after: 0s\n" + minimal, "line 1: stale_after: must be greater than zero"},
		{"bad signal", "checkpoint_signal: BOOM\n" + minimal, `line 1: checkpoint_signal: unsupported signal "BOOM"`},
		{"kube mode", "kubernetes:\n  reclaim: nuke\n" + minimal, `line 2: kubernetes.reclaim: must be one of`},
		{"webhook url", "channels:\n  webhook:\n    url: ftp://x\n" + minimal, "line 3: channels.webhook.url: must be an absolute http(s) URL"},
		{"email empty", "channels:\n  email: {}\n" + minimal, "line 2: channels.email: needs a domain or recipients"},
		{"email addr", "channels:\n  email:\n    to: [nobody]\n" + minimal, `line 3: channels.email.to[0]: invalid address "nobody"`},
		{"no tiers", "dry_run: false\n", "line 1: tiers: at least one tier is required"},
		{"tier name", "tiers:\n  - name: 'a b'\n", `line 2: tiers[0].name: a tier needs a name`},
		{"dup tier", "tiers:\n  - name: a\n  - name: a\n", `line 3: tiers[1].name: duplicate tier "a"`},
		{"match key nothing fills", "tiers:\n  - name: a\n    match:\n      priority: [high]\n", `line 4: tiers[0].match.priority: unknown match key "priority": nothing fills it`},
		{"match key typo", "tiers:\n  - name: a\n    match:\n      partition: [prod]\n", `line 4: tiers[0].match.partition: unknown match key "partition"`},
		{"match list shape", "tiers:\n  - name: a\n    match:\n      partitions: {x: y}\n", `line 4: tiers[0].match.partitions: want a non-empty list`},
		{"match map shape", "tiers:\n  - name: a\n    match:\n      labels: [x]\n", `line 4: tiers[0].match.labels: want a non-empty map`},
		{"bad glob", "tiers:\n  - name: a\n    match:\n      partitions: ['[x']\n", `line 4: tiers[0].match.partitions[0]: invalid pattern "[x"`},
		{"max run", "tiers:\n  - name: a\n    max_run_time: 2days\n", `line 3: tiers[0].max_run_time: invalid duration "2days"`},
		{"pattern", "tiers:\n  - name: a\n    rules:\n      - pattern: lazy\n        steps: [{action: warn}]\n", `line 4: tiers[0].rules[0].pattern: unknown pattern "lazy"`},
		{"no steps", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n", "line 4: tiers[0].rules[0].steps: a rule needs at least one step"},
		{"dup rule", "tiers:\n  - name: a\n    rules:\n      - {pattern: stuck, steps: [{action: warn}]}\n      - {pattern: stuck, steps: [{action: warn}]}\n", `line 5: tiers[0].rules[1].pattern: duplicate rule`},
		{"action", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: destroy\n", `line 6: tiers[0].rules[0].steps[0].action: unknown action "destroy"`},
		{"dup action", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n          - action: warn\n", `line 7: tiers[0].rules[0].steps[1].action: action "warn" appears twice`},
		{"order", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - {action: warn, after: 1h}\n          - {action: reclaim, after: 5m}\n", "line 7: tiers[0].rules[0].steps[1].after: steps must be in order"},
		{"signal on warn", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - {action: warn, signal: USR1}\n", "line 6: tiers[0].rules[0].steps[0].signal: only a checkpoint step sends a signal"},
		{"channel unconfigured", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n            channels: [webhook]\n", `line 7: tiers[0].rules[0].steps[0].channels[0]: channel "webhook" is not configured`},
		{"channel unknown", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n            channels: [pager]\n", `line 7: tiers[0].rules[0].steps[0].channels[0]: unknown channel "pager"`},
		{"reclaim without warn", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: notify\n          - action: reclaim\n", "line 7: tiers[0].rules[0].steps[1].action: a reclaim step needs an earlier warn step"},
		{"min wasted", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        min_wasted_gpu_hours: -1\n        steps: [{action: warn}]\n", "line 5: tiers[0].rules[0].min_wasted_gpu_hours: must be zero or more"},
		{"exemption empty", minimal + "exemptions:\n  - reason: because\n", "line 11: exemptions[0]: an exemption needs a user, team or job"},
		{"exemption until", minimal + "exemptions:\n  - user: bob\n    until: tomorrow\n", `line 12: exemptions[0].until: invalid time "tomorrow"`},
		{"duplicate key", "dry_run: true\ndry_run: false\n" + minimal, `line 2: dry_run: mapping key "dry_run" already defined`},
		{"syntax", "tiers: [\n", "parse:"},
		{"two docs", minimal + "---\n" + minimal, "single YAML document"},
		{"empty", "", "empty policy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("accepted bad policy:\n%s", tc.doc)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("tiers: [{name: a, rules: [{pattern: stuck, steps: [{action: reclaim, after: 1h}]}]}]"))
	f.Add([]byte("dry_run: false\nrate_limits: {reclaims_per_cycle: 1}\n"))
	f.Add([]byte("tiers:\n  - name: a\n    match: {labels: {x: '[*'}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "policy") &&
				!strings.Contains(err.Error(), "parse") {
				t.Fatalf("error without a location: %v", err)
			}
			return
		}
		// An accepted policy is internally consistent.
		if len(p.Tiers) == 0 || p.StaleAfter <= 0 || p.RateLimits.ReclaimsPerCycle < 0 {
			t.Fatalf("accepted inconsistent policy %+v", p)
		}
		for _, tr := range p.Tiers {
			for _, r := range tr.Rules {
				if !r.Pattern.Valid() || len(r.Steps) == 0 {
					t.Fatalf("accepted bad rule %+v", r)
				}
			}
		}
	})
}

// TestDurationsInDaysAndWeeks: the policy reads the one duration syntax
// every gpuwatch file shares, days and weeks included.
func TestDurationsInDaysAndWeeks(t *testing.T) {
	for in, want := range map[string]time.Duration{"1d": 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1d12h": 36 * time.Hour, "90m": 90 * time.Minute} {
		p, err := Parse([]byte("min_warning: " + in + "\n" + minimal))
		if err != nil || p.MinWarning != want {
			t.Errorf("min_warning: %s gave %v, %v; want %v", in, p.MinWarning, err, want)
		}
	}
}
