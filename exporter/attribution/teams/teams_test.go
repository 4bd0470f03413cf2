package teams

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

const example = `team:
  podLabel: team
  namespaces: {ml-research: research}
  accounts:
    physics: physics-dept
  users: {alice: research, bob: infra}
  default: unassigned
kinds:
  - kind: service
    podName: '^triton-'
  - kind: interactive
    jobName: '^(rstudio|vscode)'
    podName: '^notebook-'
`

func TestApply(t *testing.T) {
	c, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	off := false
	noBuiltins, err := Parse([]byte("builtinKinds: false\n"))
	if err != nil || noBuiltins.BuiltinKinds == nil || *noBuiltins.BuiltinKinds != off {
		t.Fatalf("builtinKinds: %+v, %v", noBuiltins, err)
	}
	cases := []struct {
		name             string
		cfg              *Config
		in               source.Allocation
		wantTeam, wantKd string
	}{
		{"namespace mapping outranks the pod label", c, source.Allocation{Namespace: "ml-research", Pod: "x", Labels: map[string]string{"team": "vision"}}, "research", "batch"},
		{"pod label where no mapping applies", c, source.Allocation{Namespace: "other", Pod: "x", Labels: map[string]string{"team": "vision"}}, "vision", "batch"},
		{"empty pod label: default", c, source.Allocation{Namespace: "other", Pod: "x", Labels: map[string]string{"team": ""}}, "unassigned", "batch"},
		{"user mapping outranks the pod label", c, source.Allocation{Namespace: "other", User: "bob", Pod: "x", Labels: map[string]string{"team": "ml-infra"}}, "infra", "batch"},
		{"namespace", c, source.Allocation{Namespace: "ml-research", Pod: "triton-0"}, "research", "service"},
		{"account before user", c, source.Allocation{HPCJob: "1", Account: "physics", User: "alice", JobName: "rstudio-session"}, "physics-dept", "interactive"},
		{"user", c, source.Allocation{HPCJob: "1", User: "bob", JobName: "interactive"}, "infra", "interactive"},
		{"default team, builtin kind", c, source.Allocation{Namespace: "other", Pod: "jupyter-carol"}, "unassigned", "interactive"},
		{"either pattern of a rule", c, source.Allocation{Namespace: "other", Pod: "notebook-1"}, "unassigned", "interactive"},
		{"scheduler's own values kept", c, source.Allocation{User: "bob", Team: "given", Kind: "service"}, "given", "service"},
		{"nil config: builtin kinds only", nil, source.Allocation{HPCJob: "5", JobName: "sys/dashboard/sys/bc_desktop", User: "bob"}, "", "interactive"},
		{"builtins off", noBuiltins, source.Allocation{Pod: "jupyter-carol"}, "", "batch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.in
			tc.cfg.Apply(&a)
			if a.Team != tc.wantTeam || a.Kind != tc.wantKd {
				t.Fatalf("team, kind = %q, %q; want %q, %q", a.Team, a.Kind, tc.wantTeam, tc.wantKd)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown top-level key", "teams: {}\n", `teams file:1: teams: unknown key "teams" (did you mean "team"?)`},
		{"unknown team key", "team:\n  namespace: {a: b}\n", `teams file:2: team.namespace: unknown key "namespace" (did you mean "namespaces"?)`},
		{"unknown rule key", "kinds:\n  - kind: batch\n    jobname: x\n", `teams file:3: kinds[0].jobname: unknown key "jobname" (did you mean "job_name"?)`},
		{"bad regexp", "kinds:\n  - kind: batch\n    job_name: '(['\n", "teams file:3: kinds[0].job_name: bad pattern"},
		{"bad kind", "kinds:\n  - kind: training\n    job_name: x\n", "teams file:2: kinds[0].kind: kind \"training\""},
		{"rule without pattern", "kinds:\n  - kind: batch\n", "teams file:2: kinds[0]: give job_name"},
		{"not a map", "team: [a]\n", "teams file:1: team: cannot unmarshal !!seq"},
		{"two documents", "team: {default: a}\n---\nteam: {default: b}\n", "teams file:2: more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if c, err := Parse(nil); err != nil || c == nil {
		t.Fatalf("empty file: %v", err)
	}
	p := filepath.Join(t.TempDir(), "teams.yml")
	if err := os.WriteFile(p, []byte("team: {default: x}\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p+`:2: bogus: unknown key "bogus"`) {
		t.Fatalf("Load err = %v", err)
	}
}

// TestOldCamelCaseKeys: files written before the keys became snake_case
// still read the same, each old key with a deprecation warning.
func TestOldCamelCaseKeys(t *testing.T) {
	old, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	snake := strings.NewReplacer("podLabel", "pod_label", "podName", "pod_name", "jobName", "job_name").Replace(example)
	cur, err := Parse([]byte(snake))
	if err != nil {
		t.Fatal(err)
	}
	// Both trust the pod label "team": one warning says so.
	if len(cur.Warnings) != 1 || len(old.Warnings) != 5 {
		t.Fatalf("warnings: new file %q, old file %q (want 1 and 5)", cur.Warnings, old.Warnings)
	}
	if !strings.Contains(old.Warnings[0], `teams file:2: team.pod_label: "podLabel" is deprecated, write "pod_label"`) {
		t.Errorf("warning %q", old.Warnings[0])
	}
	for _, a := range []source.Allocation{{Pod: "triton-0"}, {JobName: "rstudio"}, {Labels: map[string]string{"team": "x"}}} {
		x, y := a, a
		old.Apply(&x)
		cur.Apply(&y)
		if x.Team != y.Team || x.Kind != y.Kind {
			t.Errorf("%+v: old keys give %s/%s, new %s/%s", a, x.Team, x.Kind, y.Team, y.Kind)
		}
	}
}

// TestPodLabelTrust: pod_label is the operator trusting one pod label to
// name a team where no mapping of theirs applies. A key no pod could carry
// (a pattern, unicode, control characters, oversized) is refused at its
// line; an accepted one warns who can then choose their team. Whatever
// value a pod puts in the label, a namespace, account or user mapping
// still wins, and without pod_label no label names a team.
func TestPodLabelTrust(t *testing.T) {
	for _, k := range []string{"*", "team*", "te?m", "[t]eam", "gpuwatch.io/*", "t\u00ebam", "\u202eteam", "\uff54eam",
		"my team", "team ", "-team", "team.", "/team", "team/", "a/b/c", "Team.IO/x", strings.Repeat("n", 64),
		strings.Repeat("p", 254) + "/x", strings.Repeat("k", 5000), "te\tam", "\x1b[2J", "\x1bteam", "$(id)", "team;id"} {
		t.Run(fmt.Sprintf("refused %.30q", k), func(t *testing.T) {
			_, err := Parse(fmt.Appendf(nil, "team:\n  default: x\n  pod_label: %q\n", k))
			if err == nil || !strings.Contains(err.Error(), "teams file:3: team.pod_label: ") {
				t.Fatalf("err = %v, want a refusal at line 3", err)
			}
			if strings.ContainsAny(strings.SplitN(err.Error(), "team.pod_label: ", 2)[1], "\x1b\u202e\t") {
				t.Fatalf("message %q echoes a raw control character", err)
			}
		})
	}
	for _, k := range []string{"team", "gpuwatch.io/team", "app.kubernetes.io/part-of", strings.Repeat("n", 63)} {
		t.Run("accepted "+k[:min(len(k), 30)], func(t *testing.T) {
			c, err := Parse(fmt.Appendf(nil, "team:\n  pod_label: %q\n", k))
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("teams file:2: team.pod_label: the pod label %q names the team of a pod whose namespace team.namespaces does not map: any user who can create or update pods in such a namespace chooses their team", k)
			if len(c.Warnings) != 1 || !strings.HasPrefix(c.Warnings[0], want) {
				t.Fatalf("warnings %q, want %q", c.Warnings, want)
			}
		})
	}
	mapped, err := Parse([]byte("team:\n  pod_label: team\n  namespaces: {research: research}\n  accounts: {phys: physics}\n  users: {carol: ops}\n  default: unassigned\n"))
	if err != nil {
		t.Fatal(err)
	}
	unlabelled, err := Parse([]byte("team:\n  namespaces: {research: research}\n  default: unassigned\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"ml-infra", "", "research", strings.Repeat("x", 63), "ops"} {
		for _, c := range []struct {
			name   string
			cfg    *Config
			a      source.Allocation
			mapped string // the team with no label at all
		}{
			{"mapped namespace", mapped, source.Allocation{Namespace: "research", Pod: "p"}, "research"},
			{"mapped user", mapped, source.Allocation{Namespace: "other", User: "carol", Pod: "p"}, "ops"},
			{"no pod_label", unlabelled, source.Allocation{Namespace: "other", Pod: "p"}, "unassigned"},
		} {
			t.Run(fmt.Sprintf("%s label %.20q", c.name, v), func(t *testing.T) {
				a := c.a
				a.Labels = map[string]string{"team": v}
				c.cfg.Apply(&a)
				if a.Team != c.mapped {
					t.Fatalf("team %q, want %q whatever the label says", a.Team, c.mapped)
				}
			})
		}
	}
}
