package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

// literalExceptions are the string literals outside schema/ that equal a
// contract name but are not the contract's word, keyed by file and literal,
// with why each cannot read schema. Keep it short: every other spelling of a
// contract name must come from the schema package.
var literalExceptions = map[[2]string]string{
	{"internal/clikit/logging.go", "info"}:    "a --log.level value (promslog's level names), not a finding severity",
	{"internal/clikit/logging.go", "warn"}:    "a --log.level value (promslog's level names), not a policy step",
	{"exporter/server/server.go", "Hostname"}: "a field of the landing page's template data, not the old dcgm-exporter label",
	{"exporter/attribution/teams/teams.go", "job_name"}: "the teams file's own YAML key (renamed from the legacy jobName spelling); " +
		"the teams file is a user format of its own, documented with it",
	{"exporter/attribution/cgroup/cgroup.go", "slurm"}: "the prefix Slurm gives its cgroup directories (slurm/uid_N/job_N), not the scheduler name",
	{"exporter/sim/scenario.go", "pcie_replay"}:        "a fault kind of the simulator's scenario files (it raises the PCIe replay counter), not the NVML field of that name",
}

// contractNames returns the names the literal check holds to schema, each
// mapped to what it is: every metric, clock-event reason, waste pattern,
// severity, action, kind and scheduler, and every other name schema defines
// (labels, attributes, match keys) that is not a plain English word. Plain
// words among the label names (user, team, gpu, device, source, ...) are
// left out: they are spelled as JSON keys, log keys and prose everywhere,
// and a check on them would flag words, not names.
func contractNames(t *testing.T) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, m := range schema.All() {
		names[m.Name] = "metric"
	}
	for _, r := range schema.ClockEventReasons {
		names[r.Name] = "clock-event reason"
	}
	for _, p := range schema.Patterns {
		names[string(p)] = "waste pattern"
	}
	for _, s := range []schema.Severity{schema.SeverityInfo, schema.SeverityWarning, schema.SeverityCritical} {
		names[string(s)] = "severity"
	}
	for _, a := range []schema.Action{schema.ActionNotify, schema.ActionWarn, schema.ActionCheckpoint, schema.ActionReclaim, schema.ActionKill, schema.ActionResize} {
		names[string(a)] = "action"
	}
	for _, k := range schema.Kinds {
		names[k] = "kind"
	}
	for _, s := range []string{schema.SchedulerSlurm, schema.SchedulerKubernetes} {
		names[s] = "scheduler"
	}
	distinct := regexp.MustCompile(`[_A-Z0-9./]`)
	add := func(n, what string) {
		if _, ok := names[n]; !ok && distinct.MatchString(n) {
			names[n] = what
		}
	}
	for _, a := range schema.AllocationAttrs {
		add(string(a.Attr), "allocation attribute")
		add(a.MatchKey, "policy match key")
	}
	// Every string constant of the package: label names and the rest.
	dir := filepath.Join(root, "schema")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, v := range s.(*ast.ValueSpec).Values {
					if l, ok := v.(*ast.BasicLit); ok && l.Kind == token.STRING {
						n, _ := strconv.Unquote(l.Value)
						add(n, "schema constant")
					}
				}
			}
		}
	}
	return names
}

// TestContractNamesNotSpelled: outside schema/, no non-test Go file spells a
// contract name as a string literal; it reads the name from schema. Struct
// tags (the names of a file format's fields) and import paths are not names
// of the contract, and literalExceptions lists the rest, with reasons.
func TestContractNamesNotSpelled(t *testing.T) {
	names := contractNames(t)
	used := map[[2]string]bool{}
	fset := token.NewFileSet()
	for _, f := range files(t) {
		if !strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "schema/") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(root, f), nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.Field:
				if n.Tag != nil {
					return false
				}
			case *ast.BasicLit:
				s, err := strconv.Unquote(n.Value)
				if n.Kind != token.STRING || err != nil {
					return false
				}
				what, ok := names[s]
				if !ok {
					return false
				}
				key := [2]string{f, s}
				if _, ok := literalExceptions[key]; ok {
					used[key] = true
					return false
				}
				t.Errorf("%s: %q is a %s of the schema package; read it from there instead of spelling it", fset.Position(n.Pos()), s, what)
			}
			return true
		})
	}
	for k, why := range literalExceptions {
		if !used[k] {
			t.Errorf("literalExceptions: %s no longer spells %q (%s); remove the entry", k[0], k[1], why)
		}
	}
}

var (
	metricTokenRE = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	recordRE      = regexp.MustCompile(`(?m)^\s*- record: (\S+)$`)
)

// TestGeneratedMetricNames: every metric name in the generated rules and
// dashboards (and the Helm chart's copies of them) is a schema metric, one
// of a histogram's series, or a recording rule of the generated rules;
// rules/ and dashboards/ hold the tests that regenerate them from a renamed
// catalogue, so the names are not only known but taken from schema.
func TestGeneratedMetricNames(t *testing.T) {
	known := map[string]bool{}
	for _, m := range schema.All() {
		known[m.Name] = true
		if m.Type == schema.Histogram {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				known[m.Name+s] = true
			}
		}
	}
	rec, err := os.ReadFile(filepath.Join(root, "rules", "gpuwatch-recording.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range recordRE.FindAllStringSubmatch(string(rec), -1) {
		known[m[1]] = true
	}
	var gen []string
	for _, g := range []string{"rules/gpuwatch-*.yml", "dashboards/generated/*.json", "deploy/helm/gpuwatch/files/*/*"} {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			t.Fatal(err)
		}
		gen = append(gen, m...)
	}
	var checked int
	for _, f := range gen {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, tok := range metricTokenRE.FindAllString(string(b), -1) {
			metric := strings.HasPrefix(tok, "DCGM_FI_") || strings.HasPrefix(tok, "gpuwatch_") || strings.Contains(tok, ":gpuwatch_")
			if !metric || strings.HasSuffix(tok, "_") || known[tok] {
				continue
			}
			t.Errorf("%s: %s is neither a schema metric nor a recording rule", f, tok)
		}
	}
	if checked < 12 {
		t.Errorf("checked %d generated files; the rules and dashboards are missing", checked)
	}
}
