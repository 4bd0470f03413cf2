package quickstart

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/gpuwatch/gpuwatch/rules"
)

// The quickstart's blocks this test runs, each marked in docs/quickstart.md
// with <!-- prometheus: NAME --> right above its fence.
const (
	blockConfig    = "quickstart"    // prometheus.yml: the exporter's and the analyzer's jobs, the rule files
	blockWebConfig = "web-config"    // the analyzer's --web.config.file with basic auth
	blockAuthJob   = "analyzer-auth" // the analyzer's job with the password, in place of the plain one
)

// The ports the quickstart's targets name: dcgm-exporter's, which the
// exporter keeps, and the analyzer's default.
const (
	exporterPort = "9400"
	analyzerPort = "9836"
)

var blockRE = regexp.MustCompile("(?s)<!-- prometheus: ([a-z-]+) -->\n```yaml\n(.*?)```")

// docBlocks returns the marked YAML blocks of docs/quickstart.md by name.
func docBlocks(t *testing.T, root string) map[string]string {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(root, "docs", "quickstart.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range blockRE.FindAllStringSubmatch(string(md), -1) {
		if _, dup := out[m[1]]; dup {
			t.Fatalf("docs/quickstart.md marks two blocks %q", m[1])
		}
		out[m[1]] = m[2]
	}
	for _, name := range []string{blockConfig, blockWebConfig, blockAuthJob} {
		if out[name] == "" {
			t.Fatalf("docs/quickstart.md has no block marked <!-- prometheus: %s -->", name)
		}
	}
	return out
}

// targets are the addresses this test listens on in place of the
// quickstart's hosts.
type targets struct {
	exporter, analyzer, protected string
	// passwordFile holds the password the protected analyzer's web config
	// asks for.
	passwordFile string
}

// writeWebConfig writes the quickstart's web config with the hash of
// password in place of the placeholder, and returns its path and the user.
func writeWebConfig(t *testing.T, dir, block, password string) (path, user string) {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatalf("the quickstart's web config: %v", err)
	}
	users, _ := cfg["basic_auth_users"].(map[string]any)
	if len(users) != 1 {
		t.Fatalf("the quickstart's web config names %d basic_auth_users, want one (Prometheus)", len(users))
	}
	for u := range users {
		user = u
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users[user] = string(hash)
	return writeYAML(t, filepath.Join(dir, "web-config.yml"), cfg), user
}

// writePrometheusConfig writes the quickstart's prometheus.yml with its
// targets replaced by this test's, every interval at one second, and the
// shipped rule files; the password job is added beside the plain one (a
// Prometheus needs distinct job names; the quickstart has one replace the
// other).
func writePrometheusConfig(t *testing.T, root, dir string, blocks map[string]string, tg targets, user string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(blocks[blockConfig]), &cfg); err != nil {
		t.Fatalf("the quickstart's prometheus.yml: %v", err)
	}
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	cfg["rule_files"] = ruleFiles(t, root, dir, cfg["rule_files"])
	jobs, _ := cfg["scrape_configs"].([]any)
	seen := map[string]bool{}
	for _, j := range jobs {
		port := retarget(t, j.(map[string]any), map[string]string{exporterPort: tg.exporter, analyzerPort: tg.analyzer})
		seen[port] = true
	}
	if !seen[exporterPort] || !seen[analyzerPort] {
		t.Fatalf("the quickstart's prometheus.yml scrapes ports %v; want the exporter's %s and the analyzer's %s", seen, exporterPort, analyzerPort)
	}
	var auth []any
	if err := yaml.Unmarshal([]byte(blocks[blockAuthJob]), &auth); err != nil || len(auth) != 1 {
		t.Fatalf("the quickstart's analyzer job with a password: want one scrape config, got %d (%v)", len(auth), err)
	}
	job := auth[0].(map[string]any)
	if port := retarget(t, job, map[string]string{analyzerPort: tg.protected}); port != analyzerPort {
		t.Fatalf("the quickstart's analyzer job with a password scrapes port %s, want %s", port, analyzerPort)
	}
	ba, _ := job["basic_auth"].(map[string]any)
	if ba["username"] != user || ba["password_file"] == nil {
		t.Fatalf("the quickstart's analyzer job sends basic_auth %v; want the web config's user %q and a password_file", ba, user)
	}
	ba["password_file"] = tg.passwordFile
	job["job_name"] = fmt.Sprint(job["job_name"]) + "-with-password"
	cfg["scrape_configs"] = append(jobs, job)
	return writeYAML(t, filepath.Join(dir, "prometheus.yml"), cfg)
}

// retarget points a scrape config's static targets at the test's addresses,
// by the port each names, scraped every second, and returns that port.
func retarget(t *testing.T, job map[string]any, byPort map[string]string) string {
	t.Helper()
	job["scrape_interval"] = "1s"
	statics, _ := job["static_configs"].([]any)
	port := ""
	for _, s := range statics {
		sc := s.(map[string]any)
		ts, _ := sc["targets"].([]any)
		for _, target := range ts {
			_, p, err := net.SplitHostPort(fmt.Sprint(target))
			if err != nil || byPort[p] == "" || (port != "" && p != port) {
				t.Fatalf("job %v: target %v is none of the ports this test stands in for (%v)", job["job_name"], target, byPort)
			}
			port = p
		}
		// One target per job: the test runs one exporter for the
		// quickstart's list of GPU nodes.
		sc["targets"] = []string{byPort[port]}
	}
	if port == "" {
		t.Fatalf("job %v has no static target", job["job_name"])
	}
	return port
}

// ruleFiles writes the shipped rule files the quickstart loads, every
// group evaluated every second, and returns their paths; a file the
// quickstart names that rules/ does not ship fails the test.
func ruleFiles(t *testing.T, root, dir string, listed any) []string {
	t.Helper()
	names, _ := listed.([]any)
	var out []string
	for _, n := range names {
		base := filepath.Base(fmt.Sprint(n))
		if !slices.Contains([]string{rules.RecordingFile, rules.AlertsFile}, base) {
			t.Fatalf("the quickstart loads rule file %v, which rules/ does not ship", n)
		}
		data, err := os.ReadFile(filepath.Join(root, "rules", base))
		if err != nil {
			t.Fatal(err)
		}
		f, err := rules.Parse(base, data)
		if err != nil {
			t.Fatal(err)
		}
		for i := range f.Groups {
			if f.Groups[i].Interval != "" {
				f.Groups[i].Interval = "1s"
			}
		}
		out = append(out, writeYAML(t, filepath.Join(dir, base), f))
	}
	if !slices.Contains(out, filepath.Join(dir, rules.RecordingFile)) {
		t.Fatalf("the quickstart loads %v, not the recording rules the team dashboard reads (%s)", names, rules.RecordingFile)
	}
	return out
}

// writeScenario writes the exporter's built-in scenario with its origin 8 h
// back: its first node (the one the exporter simulates) then has every
// waste it shows under way (the CPU-only job from 10 min, the straggler
// from 1 h, the orphan from 3 h), where a run of the quickstart from the
// scenario's start would take hours to show them.
func writeScenario(t *testing.T, root, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "exporter", "sim", "scenarios", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	origin := time.Now().Add(-8 * time.Hour).UTC().Format(time.RFC3339)
	m := doc.Content[0]
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "origin"}, &yaml.Node{Kind: yaml.ScalarNode, Value: origin})
	return writeYAML(t, filepath.Join(dir, "scenario.yaml"), &doc)
}

// firstNode is the node the exporter simulates without --sim.node.
func firstNode(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "exporter", "sim", "scenarios", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Fleet []struct {
			Hostnames []string `yaml:"hostnames"`
		} `yaml:"fleet"`
	}
	if err := yaml.Unmarshal(data, &s); err != nil || len(s.Fleet) == 0 || len(s.Fleet[0].Hostnames) == 0 {
		t.Fatalf("the built-in scenario's first node: %v", err)
	}
	return s.Fleet[0].Hostnames[0]
}

// analyzerConfig keeps every detector, at 30 s where the quickstart's
// defaults wait hours: the analyzer's thresholds are not what this test is
// about, its series are.
const analyzerConfig = `step: 30s
patterns:
  cpu_only: {min_duration: 30s}
  over_requested: {min_duration: 30s}
  stuck: {idle_duration: 30s, spin_duration: 30s}
  startup_overhead: {min_delay: 30s}
  idle_session: {min_duration: 30s}
  low_utilization: {min_duration: 30s}
  orphan_process: {min_duration: 30s}
`

// writePolicy writes the quickstart's policy (deploy/examples/policy.yaml,
// dry-run) with its notify and warn channels sent to hookURL instead of
// example.org, so that its steps are delivered and counted.
func writePolicy(t *testing.T, root, dir, hookURL string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "deploy", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []string{"webhook", "alertmanager"} {
		url := lookup(doc.Content[0], "channels", ch, "url")
		if url == nil {
			t.Fatalf("deploy/examples/policy.yaml has no channels.%s.url", ch)
		}
		url.Value = hookURL + "/" + ch
	}
	return writeYAML(t, filepath.Join(dir, "policy.yaml"), &doc)
}

// lookup follows keys through YAML mappings.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func writeYAML(t *testing.T, path string, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.TrimLeft(content, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
