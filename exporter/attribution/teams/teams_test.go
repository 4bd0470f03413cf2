package teams

import (
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
		{"pod label first", c, source.Allocation{Namespace: "ml-research", Pod: "x", Labels: map[string]string{"team": "vision"}}, "vision", "batch"},
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
	if len(cur.Warnings) != 0 || len(old.Warnings) != 4 {
		t.Fatalf("warnings: new file %q, old file %q (want 0 and 4)", cur.Warnings, old.Warnings)
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
