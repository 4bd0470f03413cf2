package policy

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// tierOn is a tier (from line 1 of its text) that matches one key.
func tierOn(match string) string {
	return "tiers:\n  - name: chosen\n    match: {" + match + "}\n    rules:\n      - pattern: cpu_only\n        steps: [{action: warn}]\n"
}

// TestTrustWorkloadKeysHostile: trust_workload_keys is where an operator
// hands a workload's author a say, so every entry is checked as it is read:
// a key that is not a workload-owned match key, one in the wrong map, a
// pattern, a key the API server would never carry (unicode, control
// characters, oversized), the wrong shape, or a repeat is refused at its
// line; what is accepted trusts exactly the keys named.
func TestTrustWorkloadKeysHostile(t *testing.T) {
	type tc struct{ name, doc, want, trust string }
	var cases []tc
	refuse := func(name, body, want string) {
		cases = append(cases, tc{name: name, doc: "trust_workload_keys:\n" + body + minimal, want: want})
	}
	accept := func(name, body, trust string) {
		cases = append(cases, tc{name: name, doc: "trust_workload_keys:\n" + body + minimal, trust: trust})
	}
	// Shapes and keys of the section itself.
	cases = append(cases,
		tc{name: "a list", doc: "trust_workload_keys: [labels]\n" + minimal, want: "policy:1: trust_workload_keys: want a map of workload-owned match key (job_names, kinds, labels, annotations)"},
		tc{name: "a word", doc: "trust_workload_keys: everything\n" + minimal, want: "policy:1: trust_workload_keys: want a map"},
		tc{name: "true", doc: "trust_workload_keys: true\n" + minimal, want: "policy:1: trust_workload_keys: want a map"},
		tc{name: "empty section", doc: "trust_workload_keys:\n" + minimal, trust: "nothing"},
		tc{name: "empty map", doc: "trust_workload_keys: {}\n" + minimal, trust: "nothing"},
		tc{name: "section twice", doc: "trust_workload_keys: {labels: [a]}\ntrust_workload_keys: {labels: [b]}\n" + minimal, want: `policy:2: trust_workload_keys.labels[0]: mapping key "trust_workload_keys" already defined`},
	)
	refuse("unknown key", "  everything: true\n", `policy:2: trust_workload_keys.everything: unknown key "everything": the workload-owned match keys are job_names, kinds, labels, annotations`)
	refuse("attribute name for labels", "  pod_labels: [team]\n", `policy:2: trust_workload_keys.pod_labels: unknown key "pod_labels": write "labels"`)
	refuse("attribute name for annotations", "  pod_annotations: [gpuwatch.io/exempt]\n", `policy:2: trust_workload_keys.pod_annotations: unknown key "pod_annotations": write "annotations"`)
	refuse("attribute name for job names", "  job_name: true\n", `policy:2: trust_workload_keys.job_name: unknown key "job_name": write "job_names"`)
	refuse("attribute name for kinds", "  kind: true\n", `policy:2: trust_workload_keys.kind: unknown key "kind": write "kinds"`)
	refuse("camelCase", "  podLabels: [team]\n", `unknown key "podLabels"`)
	refuse("upper case", "  LABELS: [team]\n", `unknown key "LABELS"`)
	refuse("unicode key", "  \"l\u0430bels\": [team]\n", "unknown key \"l\u0430bels\"")
	refuse("escape in key", "  \"labels\\e[2J\": [team]\n", `unknown key "labels\x1b[2J"`)
	refuse("huge unknown key", "  "+strings.Repeat("k", 1000)+": true\n", `unknown key "`+strings.Repeat("k", 64)+`"... (1000 bytes)`)
	refuse("key past YAML's limit", "  "+strings.Repeat("k", 5000)+": true\n", "policy:2: mapping values are not allowed")
	refuse("labels twice", "  labels: [a]\n  labels: [b]\n", `policy:3: trust_workload_keys.labels: "labels" is given twice`)
	// Keys in the wrong map: operator-owned attributes need no trust.
	for _, s := range schema.MatchAttrs() {
		if !s.WorkloadOwned() {
			refuse("operator-owned "+s.MatchKey, "  "+s.MatchKey+": true\n",
				fmt.Sprintf("policy:2: trust_workload_keys.%s: %s is written by %s, not by the workload: it needs no trust", s.MatchKey, s.MatchKey, s.Writers))
		}
	}
	// Shapes of each entry.
	for _, m := range []string{"labels", "annotations"} {
		attr, _ := schema.AttrByMatchKey(m)
		list := fmt.Sprintf("policy:2: trust_workload_keys.%s: want a list of %s keys", m, attr.Attr)
		str := fmt.Sprintf("policy:2: trust_workload_keys.%s[0]: want a %s key (a string)", m, attr.Attr)
		refuse(m+" as true", "  "+m+": true\n", list)
		refuse(m+" as a map", "  "+m+": {team: x}\n", list)
		refuse(m+" as a word", "  "+m+": team\n", list)
		refuse(m+" as null", "  "+m+":\n", list)
		refuse(m+" number item", "  "+m+": [1]\n", str)
		refuse(m+" null item", "  "+m+": [~]\n", str)
		refuse(m+" bool item", "  "+m+": [true]\n", str)
		refuse(m+" list item", "  "+m+": [[team]]\n", str)
		refuse(m+" map item", "  "+m+": [{team: x}]\n", str)
		refuse(m+" binary item", "  "+m+": [!!binary dGVhbQ==]\n", str)
		refuse(m+" listed twice", "  "+m+": [team, team]\n", fmt.Sprintf(`policy:2: trust_workload_keys.%s[1]: "team" is listed twice`, m))
		accept(m+" empty list", "  "+m+": []\n", "nothing")
	}
	for _, m := range []string{"job_names", "kinds"} {
		want := fmt.Sprintf("policy:2: trust_workload_keys.%s: want true or false", m)
		for _, v := range []string{"[train-*]", "{a: b}", "yes", "on", "'true'", "1", "train-*", "~", "[]"} {
			refuse(m+" as "+v, "  "+m+": "+v+"\n", want)
		}
		accept(m+" true", "  "+m+": true\n", m)
		accept(m+" True", "  "+m+": True\n", m)
		accept(m+" false", "  "+m+": false\n", "nothing")
	}
	// Label keys the API server would never carry, or patterns: trusting
	// them would trust nothing, or a family of keys nobody reviewed.
	bad := map[string]string{
		`"*"`: "is a pattern", `"team*"`: "is a pattern", `"?eam"`: "is a pattern", `"[tT]eam"`: "is a pattern",
		`"gpuwatch.io/*"`: "is a pattern", `"te\\\\am"`: "is a pattern", `""`: "empty key",
		`"t\u00ebam"`: "the name must be", `"\u202eteam"`: "the name must be", `"\uff54\uff45\uff41\uff4d"`: "the name must be",
		`"team\U0001F680"`: "the name must be", `"my team"`: "the name must be", `"team "`: "the name must be",
		`" team"`: "the name must be", `"\e[2Jteam"`: "is a pattern", `"\eteam"`: "the name must be", `"te\nam"`: "the name must be",
		`"te\u0000am"`: "the name must be", `"te\tam"`: "the name must be", `"-team"`: "the name must be",
		`"team-"`: "the name must be", `"team."`: "the name must be", `"_team"`: "the name must be",
		`"a/b/c"`: "the name must be", `"team/"`: "the name must be", `"/team"`: "the prefix before '/'",
		`"Gpuwatch.IO/exempt"`: "the prefix before '/'", `"gpuwatch..io/exempt"`: "the prefix before '/'",
		`"-gpuwatch.io/exempt"`: "the prefix before '/'", `"gpu_watch.io/exempt"`: "the prefix before '/'",
		`"` + strings.Repeat("n", 64) + `"`: "the name must be", `"` + strings.Repeat("p", 254) + `/x"`: "the prefix before '/'",
		`"` + strings.Repeat("k", 10000) + `"`: "key of 10000 bytes: a label key is at most 317",
		`"team;rm -rf /"`:                      "must be", `"$(id)"`: "the name must be", `"team%0a"`: "the name must be",
	}
	for k, why := range bad {
		for _, m := range []string{"labels", "annotations"} {
			refuse(fmt.Sprintf("%s key %.40s", m, k), "  "+m+": ["+k+"]\n", fmt.Sprintf("policy:2: trust_workload_keys.%s[0]: ", m))
			cases[len(cases)-1].want += "|" + why
		}
	}
	// Keys the API server accepts are trusted exactly as written.
	for _, k := range []string{"team", "Team", "gpuwatch.io/exempt", "app.kubernetes.io/name", "a", "1", "a.b_c-d",
		strings.Repeat("n", 63), strings.Repeat("p", 253) + "/" + strings.Repeat("n", 63), "kubernetes.io/metadata.name"} {
		accept("labels key "+k[:min(len(k), 40)], "  labels: ['"+k+"']\n", "labels="+k)
	}
	accept("all four", "  labels: [team, tier]\n  annotations: [gpuwatch.io/exempt]\n  job_names: true\n  kinds: true\n",
		"job_names kinds labels=team,tier annotations="+schema.ExemptKey)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got := p.Trust.String(); got != c.trust {
					t.Fatalf("trust = %q, want %q", got, c.trust)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; trust %s", p.Trust)
			}
			for _, w := range strings.Split(c.want, "|") {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q\ndoes not contain %q", err, w)
				}
			}
			var errs configfile.Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %q is not a file error", err)
			}
			for _, e := range errs {
				if strings.ContainsAny(e.Msg, "\x1b\u202e\x00") {
					t.Fatalf("message %q carries a raw control character", e.Msg)
				}
			}
		})
	}
	if len(cases) < 150 {
		t.Fatalf("%d cases: the table lost some", len(cases))
	}
}

// TestUntrustedTierRefused: a tier chosen by a key the workload writes is
// refused at load, at the key's line, naming who can write it and how to
// trust it; trusting the key (and only that key, in its own map) lets the
// tier load.
func TestUntrustedTierRefused(t *testing.T) {
	for _, c := range []struct{ name, trust, match, want string }{
		{"pod label", "", "labels: {tier: production}",
			`policy:3: tiers[0].match.labels.tier: pod_labels key "tier" is written by the workload (any user who can create or update pods in the pod's namespace), so it cannot choose a tier unless you trust it: add "tier" to trust_workload_keys.labels`},
		{"annotation", "", "annotations: {priority: low}",
			`policy:3: tiers[0].match.annotations.priority: pod_annotations key "priority" is written by the workload`},
		{"job name", "", "job_names: [accept-*]",
			`policy:3: tiers[0].match.job_names: job_names is written by the workload (the job's submitter (sbatch --job-name, scontrol update JobName=)), so it cannot choose a tier unless you trust it: set trust_workload_keys.job_names: true`},
		{"kind", "", "kinds: [service]", `policy:3: tiers[0].match.kinds: kinds is written by the workload (whoever names the job or pod`},
		{"job names trusted false", "trust_workload_keys: {job_names: false}\n", "job_names: [x]", "policy:4: tiers[0].match.job_names: job_names is written by the workload"},
		{"kinds trusted, job names not", "trust_workload_keys: {kinds: true}\n", "job_names: [x], kinds: [batch]", "policy:4: tiers[0].match.job_names:"},
		{"key trusted in the other map", "trust_workload_keys: {annotations: [tier]}\n", "labels: {tier: production}", `policy:4: tiers[0].match.labels.tier: pod_labels key "tier"`},
		{"key trusted in another case", "trust_workload_keys: {labels: [Tier]}\n", "labels: {tier: production}", `policy:4: tiers[0].match.labels.tier: pod_labels key "tier"`},
		{"one of two keys trusted", "trust_workload_keys: {labels: [app]}\n", "labels: {app: x, tier: y}", `policy:4: tiers[0].match.labels.tier:`},
		{"untrusted beside operator keys", "", "namespaces: [prod], labels: {tier: production}", `policy:3: tiers[0].match.labels.tier:`},
		{"operator keys need no trust", "", "namespaces: [prod], namespace_labels: {env: prod}, owners: [Job]", ""},
		{"slurm operator keys need no trust", "", "partitions: [p], qos: [q], accounts: [a], users: [u], teams: [t]", ""},
		{"trusted pod label", "trust_workload_keys: {labels: [tier]}\n", "labels: {tier: production}", ""},
		{"trusted annotation", "trust_workload_keys: {annotations: [priority]}\n", "annotations: {priority: low}", ""},
		{"trusted job names", "trust_workload_keys: {job_names: true}\n", "job_names: [accept-*]", ""},
		{"trusted kinds", "trust_workload_keys: {kinds: true}\n", "kinds: [service]", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.trust + tierOn(c.match)))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
		})
	}
}

// TestSelfExemptionNeedsTrust: a pod's own gpuwatch.io/exempt exempts it
// only where the operator trusts that key in that map; untrusted, it is
// neither honoured nor needed (a pod whose labels cannot be read is still
// decided by its namespace).
func TestSelfExemptionNeedsTrust(t *testing.T) {
	const tiers = `
tiers:
  - name: research
    match: {namespaces: [research]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn}, {action: reclaim, after: 1h}]
`
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := &finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, Namespace: "research", Pod: "p",
		Job: "research/p", Start: now.Add(-2 * time.Hour), End: now, WastedGPUHours: 2}
	exempt := map[string]string{schema.ExemptKey: "true"}
	byLabel := kubeFacts("research", exempt, nil)
	byAnnotation := kubeFacts("research", nil, exempt)
	unreadable := kubeFacts("research", nil, nil)
	unreadable.Missing = map[schema.Attr]string{schema.AttrPodLabels: "pods list refused", schema.AttrPodAnnotations: "pods list refused"}
	for _, c := range []struct {
		name, trust string
		fa          *facts.Facts
		exempt      string // the reason, "" for not exempt
		missing     string
	}{
		{"label, nothing trusted", "", byLabel, "", ""},
		{"annotation, nothing trusted", "", byAnnotation, "", ""},
		{"label, annotation trusted", "trust_workload_keys: {annotations: [gpuwatch.io/exempt]}\n", byLabel, "", ""},
		{"annotation, label trusted", "trust_workload_keys: {labels: [gpuwatch.io/exempt]}\n", byAnnotation, "", ""},
		{"label, another key trusted", "trust_workload_keys: {labels: [team]}\n", byLabel, "", ""},
		{"label trusted", "trust_workload_keys: {labels: [gpuwatch.io/exempt]}\n", byLabel, schema.ExemptKey + "=true", ""},
		{"annotation trusted", "trust_workload_keys: {annotations: [gpuwatch.io/exempt]}\n", byAnnotation, schema.ExemptKey + "=true", ""},
		{"unreadable, nothing trusted: decided", "", unreadable, "", ""},
		{"unreadable, trusted: undecided", "trust_workload_keys: {annotations: [gpuwatch.io/exempt]}\n", unreadable, "", "exemption pod_annotations: pods list refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.trust + tiers))
			if err != nil {
				t.Fatal(err)
			}
			ev := p.Evaluate(f, c.fa, now)
			if ev.Exempt != (c.exempt != "") || ev.ExemptReason != c.exempt {
				t.Errorf("exempt %v (%q), want %q", ev.Exempt, ev.ExemptReason, c.exempt)
			}
			if !strings.Contains(ev.Missing, c.missing) || (c.missing == "") != (ev.Missing == "") {
				t.Errorf("missing %q, want %q", ev.Missing, c.missing)
			}
			if c.missing == "" && (ev.Tier == nil || ev.Tier.Name != "research") {
				t.Errorf("tier %v, want research", ev.Tier)
			}
		})
	}
}

// TestTrustWarnings: check-config names every decision the workload can
// sway, and who can sway it; a policy that trusts nothing has no such
// warning.
func TestTrustWarnings(t *testing.T) {
	p, err := Parse([]byte(`
trust_workload_keys:
  labels: [tier, gpuwatch.io/exempt, unused]
  job_names: true
tiers:
  - name: prod
    match: {labels: {tier: production}}
    rules:
      - pattern: cpu_only
        steps: [{action: warn}]
  - name: sweeps
    match: {job_names: [sweep-*]}
    rules:
      - pattern: cpu_only
        steps: [{action: warn}]
exemptions:
  - {job: "ml/train-*"}
  - {job: "4242"}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`tier "prod" is chosen by pod_labels key "tier", which any user who can create or update pods in the pod's namespace can write (trusted in trust_workload_keys): they can move their own pods into or out of it`,
		`tier "sweeps" is chosen by job_names, which the job's submitter (sbatch --job-name, scontrol update JobName=) can write (trusted in trust_workload_keys): they can move their own jobs into or out of it`,
		`pod_labels key gpuwatch.io/exempt exempts a pod from every step (trusted in trust_workload_keys.labels): any user who can create or update pods in the pod's namespace can exempt their own pods`,
		`trust_workload_keys.labels trusts "unused", which no tier matches`,
		`exemptions[0] names pods by name (job "ml/train-*"): any user who can create pods in namespace "ml" chooses a pod's name`,
	}
	if got := p.Warnings(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var b strings.Builder
	if err := p.WriteEffective(&b); err != nil || !strings.Contains(b.String(), "workload decides: job_names labels=gpuwatch.io/exempt,tier,unused\n") {
		t.Errorf("effective policy (%v):\n%s", err, b.String())
	}
	safe, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range safe.Warnings() {
		if strings.Contains(w, "trust") || strings.Contains(w, "can write") {
			t.Errorf("a policy that trusts nothing warns %q", w)
		}
	}
}

// TestPodLabelTeamWarnings: when the teams file takes a team from a pod
// label, every tier and exemption by team is one the pod's author can sway.
func TestPodLabelTeamWarnings(t *testing.T) {
	p, err := Parse([]byte(tierOn("teams: [ml-infra]") + "exemptions:\n  - {team: ml-infra}\n  - {user: alice}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.PodLabelTeamWarnings(""); len(got) != 0 {
		t.Errorf("no pod label: %q", got)
	}
	got := p.PodLabelTeamWarnings("team")
	why := `the teams file takes a pod's team from its label "team" where no namespace, account or user mapping gives one: any user who can create or update pods in the pod's namespace can choose it`
	want := []string{`tier "chosen" matches teams, and ` + why, `exemptions[0] exempts team "ml-infra", and ` + why}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
