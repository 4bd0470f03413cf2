package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
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
		{"unknown top key", "dry_rn: true\n" + minimal, `policy:1: dry_rn: unknown key "dry_rn" (did you mean "dry_run"?)`},
		{"unknown tier key", "tiers:\n  - name: a\n    reclam: true\n", `policy:3: tiers[0].reclam: unknown key "reclam" (did you mean "reclaim"?)`},
		{"unknown step key", minimal + "          - {action: notify, aftr: 1s}\n", `policy:10: tiers[0].rules[0].steps[2].aftr: unknown key "aftr" (did you mean "after"?)`},
		{"bool type", "dry_run: maybe\n" + minimal, "policy:1: dry_run: cannot unmarshal"},
		{"int type", "rate_limits:\n  reclaims_per_hour: lots\n" + minimal, "policy:2: rate_limits.reclaims_per_hour: cannot unmarshal"},
		{"negative rate", "rate_limits:\n  reclaims_per_cycle: -1\n" + minimal, "policy:2: rate_limits.reclaims_per_cycle: must be zero or more"},
		{"bad min_warning", "min_warning: soon\n" + minimal, `policy:1: min_warning: duration "soon": want e.g. 90s`},
		{"infinite hours", "tiers:\n  - name: t\n    rules:\n      - pattern: cpu_only\n        min_wasted_gpu_hours: .inf\n        steps: [{action: notify}]\n", "policy:5: tiers[0].rules[0].min_wasted_gpu_hours: .inf is not a number"},
		{"negative duration", "min_warning: -5m\n" + minimal, "policy:1: min_warning: duration \"-5m\" must not be negative"},
		{"zero stale", "stale_after: 0s\n" + minimal, `policy:1: stale_after: duration "0s" must be positive`},
		{"bad signal", "checkpoint_signal: BOOM\n" + minimal, `policy:1: checkpoint_signal: unsupported signal "BOOM"`},
		{"kube mode", "kubernetes:\n  reclaim: nuke\n" + minimal, `policy:2: kubernetes.reclaim: unknown reclaim mode "nuke" (one of evict, scale_owner, delete)`},
		{"webhook url", "channels:\n  webhook:\n    url: ftp://x\n" + minimal, "policy:3: channels.webhook.url: must be an absolute http(s) URL"},
		{"webhook format", "channels:\n  webhook:\n    url: http://x/hook\n    format: irc\n" + minimal, "channels.webhook.format: unknown format \"irc\" (one of gpuwatch, slack, mattermost, msteams)"},
		{"email empty", "channels:\n  email: {}\n" + minimal, "policy:2: channels.email: needs a domain or recipients"},
		{"email addr", "channels:\n  email:\n    to: [nobody]\n" + minimal, `policy:3: channels.email.to[0]: invalid address "nobody"`},
		{"no tiers", "dry_run: false\n", "policy:1: tiers: at least one tier is required"},
		{"tier name", "tiers:\n  - name: 'a b'\n", `policy:2: tiers[0].name: a tier needs a name`},
		{"dup tier", "tiers:\n  - name: a\n  - name: a\n", `policy:3: tiers[1].name: duplicate tier "a"`},
		{"match key nothing fills", "tiers:\n  - name: a\n    match:\n      priority: [high]\n", `policy:4: tiers[0].match.priority: unknown match key "priority": nothing fills it`},
		{"match key typo", "tiers:\n  - name: a\n    match:\n      partition: [prod]\n", `policy:4: tiers[0].match.partition: unknown match key "partition"`},
		{"match list shape", "tiers:\n  - name: a\n    match:\n      partitions: {x: y}\n", `policy:4: tiers[0].match.partitions: want a non-empty list`},
		{"match map shape", "tiers:\n  - name: a\n    match:\n      labels: [x]\n", `policy:4: tiers[0].match.labels: want a non-empty map`},
		{"bad glob", "tiers:\n  - name: a\n    match:\n      partitions: ['[x']\n", `policy:4: tiers[0].match.partitions[0]: invalid pattern "[x"`},
		{"max run", "tiers:\n  - name: a\n    max_run_time: 2days\n", `policy:3: tiers[0].max_run_time: duration "2days": want e.g.`},
		{"pattern", "tiers:\n  - name: a\n    rules:\n      - pattern: lazy\n        steps: [{action: warn}]\n", `policy:4: tiers[0].rules[0].pattern: unknown pattern "lazy"`},
		{"no steps", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n", "policy:4: tiers[0].rules[0].steps: a rule needs at least one step"},
		{"dup rule", "tiers:\n  - name: a\n    rules:\n      - {pattern: stuck, steps: [{action: warn}]}\n      - {pattern: stuck, steps: [{action: warn}]}\n", `policy:5: tiers[0].rules[1].pattern: duplicate rule`},
		{"action", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: destroy\n", `policy:6: tiers[0].rules[0].steps[0].action: unknown action "destroy"`},
		{"dup action", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n          - action: warn\n", `policy:7: tiers[0].rules[0].steps[1].action: action "warn" appears twice`},
		{"order", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - {action: warn, after: 1h}\n          - {action: reclaim, after: 5m}\n", "policy:7: tiers[0].rules[0].steps[1].after: steps must be in order"},
		{"signal on warn", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - {action: warn, signal: USR1}\n", "policy:6: tiers[0].rules[0].steps[0].signal: only a checkpoint step sends a signal"},
		{"channel unconfigured", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n            channels: [webhook]\n", `policy:7: tiers[0].rules[0].steps[0].channels[0]: channel "webhook" is not configured`},
		{"channel unknown", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: warn\n            channels: [pager]\n", `policy:7: tiers[0].rules[0].steps[0].channels[0]: unknown channel "pager"`},
		{"reclaim without warn", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        steps:\n          - action: notify\n          - action: reclaim\n", "policy:7: tiers[0].rules[0].steps[1].action: a reclaim step needs an earlier warn step"},
		{"min wasted", "tiers:\n  - name: a\n    rules:\n      - pattern: stuck\n        min_wasted_gpu_hours: -1\n        steps: [{action: warn}]\n", "policy:5: tiers[0].rules[0].min_wasted_gpu_hours: must be zero or more"},
		{"exemption empty", minimal + "exemptions:\n  - reason: because\n", "policy:11: exemptions[0]: an exemption needs a user, team or job"},
		{"exemption until", minimal + "exemptions:\n  - user: bob\n    until: tomorrow\n", `policy:12: exemptions[0].until: invalid time "tomorrow"`},
		{"duplicate key", "dry_run: true\ndry_run: false\n" + minimal, `policy:2: dry_run: mapping key "dry_run" already defined`},
		{"syntax", "tiers: [\n", "policy:1: did not find expected node content"},
		{"two docs", minimal + "---\n" + minimal, "policy:10: more than one YAML document"},
		{"empty", "", "empty policy"},
		{"nan hours", "tiers:\n  - name: t\n    rules:\n      - pattern: cpu_only\n        min_wasted_gpu_hours: .nan\n        steps: [{action: notify}]\n", "policy:5: tiers[0].rules[0].min_wasted_gpu_hours: .nan is not a number"},
		{"huge hours", "tiers:\n  - name: t\n    rules:\n      - pattern: cpu_only\n        min_wasted_gpu_hours: 1e999\n        steps: [{action: notify}]\n", "policy:5: tiers[0].rules[0].min_wasted_gpu_hours: cannot unmarshal"},
		{"match typo deep", "tiers:\n  - name: a\n    mach:\n      teams: [x]\n", `policy:3: tiers[0].mach: unknown key "mach" (did you mean "match"?)`},
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
			if !strings.HasPrefix(err.Error(), "policy") {
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

// TestEveryErrorCollected: one pass reports every bad key, each at its own
// line, not only the first.
func TestEveryErrorCollected(t *testing.T) {
	doc := "min_warning: soon\nstale_after: 0s\ncheckpoint_signal: BOOM\n" + minimal
	_, err := ParseFile("p.yml", []byte(doc))
	var errs configfile.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want configfile.Errors", err, err)
	}
	want := []string{"p.yml:1: min_warning: ", "p.yml:2: stale_after: ", "p.yml:3: checkpoint_signal: "}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
}

// TestStepDelaysInDays: step delays read days and weeks as well.
func TestStepDelaysInDays(t *testing.T) {
	p, err := Parse([]byte(strings.Replace(minimal, "after: 1h", "after: 1w", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Tiers[0].Rules[0].Steps[1].After; got != 7*24*time.Hour {
		t.Errorf("after: 1w gave %v", got)
	}
}

// TestSectionKeysLeftOutKeepDefaults: a section that sets one key keeps
// the defaults of the others, and a checkpoint step without a signal takes
// the policy's checkpoint_signal.
func TestSectionKeysLeftOutKeepDefaults(t *testing.T) {
	doc := "retry: {max_attempts: 3}\nout_of_service: {enabled: true}\ncheckpoint_signal: SIGTERM\n" +
		"channels:\n  alertmanager: {url: 'http://am:9093/'}\n" + strings.Replace(minimal,
		"{action: reclaim, after: 1h}", "{action: checkpoint, after: 30m}\n          - {action: reclaim, after: 1h}", 1)
	p, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if p.Retry.MaxAttempts != 3 || p.Retry.InitialBackoff != DefaultRetryInitialBackoff || p.Retry.MaxBackoff != DefaultRetryMaxBackoff {
		t.Errorf("retry = %+v", p.Retry)
	}
	if o := p.OutOfService; !o.Enabled || !o.DryRun || o.Faults != DefaultOutOfServiceFaults || o.Window != DefaultOutOfServiceWindow || !o.OnRowRemapFailure {
		t.Errorf("out_of_service = %+v", o)
	}
	if c := p.Channels; c.AlertmanagerURL != "http://am:9093" || c.AlertDuration != DefaultAlertDuration || c.Configured(ChannelWebhook) {
		t.Errorf("channels = %+v", c)
	}
	if s := p.Tiers[0].Rules[0].Steps[1]; s.Action != StepCheckpoint || s.Signal != "TERM" {
		t.Errorf("checkpoint step = %+v", s)
	}
}

// TestBadValuesOfEverySectionInOnePass: the typed fields report every bad
// value in the file at once, whatever section it is in.
func TestBadValuesOfEverySectionInOnePass(t *testing.T) {
	doc := `rate_limits: {reclaims_per_hour: -3}
channels:
  webhook: {url: 'ftp://x', format: irc}
  email: {to: [nobody]}
tiers:
  - name: a
    rules:
      - pattern: stuck
        steps:
          - {action: warn, after: -1m, channels: [pager]}
exemptions:
  - {user: '[x', until: soon}
`
	_, err := ParseFile("p.yml", []byte(doc))
	var errs configfile.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want configfile.Errors", err, err)
	}
	want := []string{
		"p.yml:1: rate_limits.reclaims_per_hour: must be zero or more",
		`p.yml:3: channels.webhook.url: must be an absolute http(s) URL, got "ftp://x"`,
		`p.yml:3: channels.webhook.format: unknown format "irc"`,
		`p.yml:4: channels.email.to[0]: invalid address "nobody"`,
		`p.yml:10: tiers[0].rules[0].steps[0].after: duration "-1m" must not be negative`,
		`p.yml:10: tiers[0].rules[0].steps[0].channels[0]: unknown channel "pager"`,
		`p.yml:12: exemptions[0].user: invalid pattern "[x"`,
		`p.yml:12: exemptions[0].until: invalid time "soon"`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
}
