package rules

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/internal/cataloguetest"
	"github.com/gpuwatch/gpuwatch/internal/promqltest"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

func runTool(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := testtool.Need(t, "promtool")
	out := runTool(t, promtool, "check", "rules", AlertsFile, RecordingFile)
	// promtool prints lint findings (e.g. "duplicate rules") with SUCCESS; clean means none.
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "Checking ") || strings.HasPrefix(line, "SUCCESS: ") {
			continue
		}
		t.Errorf("promtool check rules: unexpected output %q", line)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	promtool := testtool.Need(t, "promtool")
	files, err := filepath.Glob("tests/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no rule unit tests found in tests/: %v", err)
	}
	runTool(t, promtool, append([]string{"test", "rules"}, files...)...)
}

func TestAmtoolCheckConfig(t *testing.T) {
	amtool := testtool.Need(t, "amtool")
	runTool(t, amtool, "check-config", AlertmanagerFile)
}

func TestAmtoolRoutes(t *testing.T) {
	amtool := testtool.Need(t, "amtool")
	f, err := os.Open("tests/alertmanager_routes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		want, labels, ok := strings.Cut(line, "|")
		if !ok {
			t.Fatalf("bad routes line %q: want 'receivers | labels'", line)
		}
		want = strings.ReplaceAll(strings.TrimSpace(want), " ", "")
		args := append([]string{"config", "routes", "test", "--config.file=" + AlertmanagerFile, "--verify.receivers=" + want}, strings.Fields(labels)...)
		t.Run(strings.Join(strings.Fields(labels), ","), func(t *testing.T) { runTool(t, amtool, args...) })
		n++
	}
	if n == 0 {
		t.Fatal("no route cases")
	}
}

func allRules(t *testing.T) []Rule {
	t.Helper()
	var out []Rule
	for _, name := range []string{AlertsFile, RecordingFile} {
		f, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f.Groups {
			out = append(out, g.Rules...)
		}
	}
	return out
}

// TestEveryMetricInCatalogue fails when a rule reads a name that neither the
// catalogue nor a recording rule defines: a typo, or a renamed metric.
func TestEveryMetricInCatalogue(t *testing.T) {
	recorded, err := Recorded()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"up": true}
	for _, r := range recorded {
		known[r] = true
	}
	for _, r := range allRules(t) {
		names, err := promqltest.MetricNames(r.Expr)
		if err != nil {
			t.Fatalf("%s%s: %v", r.Alert, r.Record, err)
		}
		if len(names) == 0 {
			t.Errorf("%s%s: no metric in %q", r.Alert, r.Record, r.Expr)
		}
		for _, n := range names {
			if _, ok := schema.Lookup(n); !ok && !known[n] {
				t.Errorf("%s%s reads %s, which is not in the schema catalogue nor a recording rule", r.Alert, r.Record, n)
			}
		}
	}
}

var recordName = regexp.MustCompile(`^[a-zA-Z_]+:[a-zA-Z_][a-zA-Z0-9_]*:[a-z0-9_]+$`)

func TestRecordingRuleNames(t *testing.T) {
	for _, r := range allRules(t) {
		if r.Record == "" {
			continue
		}
		if !recordName.MatchString(r.Record) {
			t.Errorf("recording rule %s is not level:metric:operations", r.Record)
		}
	}
}

func TestAlertsHaveLabelsAnnotationsAndRunbooks(t *testing.T) {
	severities := map[string]bool{"critical": true, "warning": true, "info": true}
	seen := map[string]bool{}
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if !severities[r.Labels["severity"]] {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		const prefix = "https://github.com/gpuwatch/gpuwatch/blob/main/"
		url := r.Annotations["runbook_url"]
		if !strings.HasPrefix(url, prefix+"docs/runbooks/") {
			t.Errorf("%s: runbook_url %q is not under docs/runbooks/", r.Alert, url)
			continue
		}
		if _, err := os.Stat(filepath.Join("..", strings.TrimPrefix(url, prefix))); err != nil {
			t.Errorf("%s: runbook missing: %v", r.Alert, err)
		}
	}
	if len(seen) == 0 {
		t.Fatal("no alerts")
	}
}

// TestXIDCatalogue pins the split of XID codes between the critical and the
// application alert, so an edit cannot silently drop a code NVIDIA lists.
func TestXIDCatalogue(t *testing.T) {
	codes := func(alert string) map[string]bool {
		for _, r := range allRules(t) {
			if r.Alert != alert {
				continue
			}
			m := regexp.MustCompile(`xid=~"([0-9|]+)"`).FindStringSubmatch(r.Expr)
			if m == nil {
				t.Fatalf("%s: no xid=~ matcher in %q", alert, r.Expr)
			}
			out := map[string]bool{}
			for _, c := range strings.Split(m[1], "|") {
				out[c] = true
			}
			return out
		}
		t.Fatalf("no alert %s", alert)
		return nil
	}
	tests := []struct {
		alert string
		want  []string
	}{
		{"GPUXidCritical", []string{"48", "61", "62", "64", "74", "79", "92", "94", "95", "119", "120"}},
		{"GPUXidApplicationError", []string{"13", "31", "43", "45"}},
	}
	for _, tc := range tests {
		got := codes(tc.alert)
		for _, c := range tc.want {
			if !got[c] {
				t.Errorf("%s does not match XID %s", tc.alert, c)
			}
		}
	}
	crit, app := codes("GPUXidCritical"), codes("GPUXidApplicationError")
	for c := range app {
		if crit[c] {
			t.Errorf("XID %s is both critical and an application error", c)
		}
	}
}

// unitTests is the part of a promtool test file this check reads.
type unitTests struct {
	Tests []struct {
		Name  string `yaml:"name"`
		Cases []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertUnitTested requires a firing and a non-firing promtool case per alert.
func TestEveryAlertUnitTested(t *testing.T) {
	files, _ := filepath.Glob("tests/*.yml")
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var u unitTests
		if err := yaml.Unmarshal(data, &u); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, tc := range u.Tests {
			for _, c := range tc.Cases {
				if len(c.ExpAlerts) > 0 {
					firing[c.Alertname] = true
				} else {
					quiet[c.Alertname] = true
				}
			}
		}
	}
	for _, r := range allRules(t) {
		if r.Alert == "" {
			continue
		}
		if !firing[r.Alert] {
			t.Errorf("%s has no promtool case where it fires", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s has no promtool case where it stays quiet", r.Alert)
		}
	}
}

func TestParseStrict(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"unknown key with line", "groups:\n  - name: g\n    rulez: []\n", "line 3"},
		{"alert and record", "groups:\n  - name: g\n    rules:\n      - alert: A\n        record: a:b:c\n        expr: up\n", "exactly one of alert and record"},
		{"no expr", "groups:\n  - name: g\n    rules:\n      - alert: A\n", "empty expr"},
		{"no group name", "groups:\n  - rules: []\n", "has no name"},
		{"empty", "", "empty rule file"},
		{"ok", "groups:\n  - name: g\n    rules:\n      - record: a:b:c\n        expr: up\n", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yml", []byte(tc.in))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the rule files from the Go definitions")

// TestGeneratedUpToDate fails when a committed rule file differs from what
// the Go definitions produce.
func TestGeneratedUpToDate(t *testing.T) {
	if *update {
		if err := WriteGenerated("."); err != nil {
			t.Fatal(err)
		}
	}
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run `go test ./rules -run TestGeneratedUpToDate -update`", name)
		}
	}
}

// TestNamesComeFromCatalogue renames every catalogue metric and regenerates
// the rules: a name still in the output was spelled as a literal in Go.
func TestNamesComeFromCatalogue(t *testing.T) {
	originals := cataloguetest.RenameAll(t)
	files, err := Generated()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if lit := cataloguetest.Literals(data, originals); len(lit) > 0 {
			t.Errorf("%s spells catalogue names as literals instead of reading the catalogue: %v", name, lit)
		}
	}
}
