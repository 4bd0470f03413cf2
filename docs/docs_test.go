// Package docs holds gpuwatch's documentation. Its test keeps
// configuration.md honest: every YAML block there parses with gpuwatch's own
// strict parsers, and every key those parsers know is documented.
package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
)

var blockRE = regexp.MustCompile("(?s)<!-- config: ([a-z]+) -->\n```yaml\n(.*?)```")

type block struct{ kind, body string }

func configBlocks(t *testing.T) []block {
	t.Helper()
	md, err := os.ReadFile("configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []block
	for _, m := range blockRE.FindAllStringSubmatch(string(md), -1) {
		out = append(out, block{m[1], m[2]})
	}
	return out
}

// parsers are the real ones, each strict about unknown keys.
var parsers = map[string]func(t *testing.T, body string) error{
	"analyzer": func(t *testing.T, b string) error { _, err := config.Parse("analyzer", []byte(b)); return err },
	"policy":   func(t *testing.T, b string) error { _, err := policy.Parse([]byte(b)); return err },
	"report":   func(t *testing.T, b string) error { _, err := report.ParseConfig("report", []byte(b)); return err },
	"teams":    func(t *testing.T, b string) error { _, err := teams.Parse([]byte(b)); return err },
	"web": func(t *testing.T, b string) error {
		p := filepath.Join(t.TempDir(), "web.yml")
		if err := os.WriteFile(p, []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
		return web.Validate(p)
	},
}

func TestConfigBlocksParse(t *testing.T) {
	blocks := configBlocks(t)
	seen := map[string]bool{}
	for i, b := range blocks {
		parse, ok := parsers[b.kind]
		if !ok {
			t.Errorf("block %d: unknown config kind %q", i, b.kind)
			continue
		}
		seen[b.kind] = true
		if err := parse(t, b.body); err != nil {
			t.Errorf("block %d (%s) does not parse: %v", i, b.kind, err)
		}
	}
	for k := range parsers {
		if !seen[k] {
			t.Errorf("configuration.md has no %s block", k)
		}
	}
}

// TestEveryKeyDocumented: each key the parsers accept appears in a block of
// its file.
func TestEveryKeyDocumented(t *testing.T) {
	documented := map[string]map[string]bool{}
	for _, b := range configBlocks(t) {
		if documented[b.kind] == nil {
			documented[b.kind] = map[string]bool{}
		}
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(b.body), &n); err != nil {
			t.Fatalf("%s block: %v", b.kind, err)
		}
		collectKeys(&n, documented[b.kind])
	}
	src, err := os.ReadFile("../analyzer/policy/file.go")
	if err != nil {
		t.Fatal(err)
	}
	policyKeys := map[string]bool{}
	for _, m := range regexp.MustCompile(`yaml:"([a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		policyKeys[m[1]] = true
	}
	known := map[string]map[string]bool{
		"analyzer": structKeys(reflect.TypeOf(config.Config{})),
		"report":   structKeys(reflect.TypeOf(report.Config{})),
		"teams":    structKeys(reflect.TypeOf(teams.Config{})),
		"policy":   policyKeys,
	}
	for kind, keys := range known {
		if len(keys) < 5 {
			t.Fatalf("%s: found only %d keys in the parser; is the key extraction broken?", kind, len(keys))
		}
		var missing []string
		for k := range keys {
			if !documented[kind][k] {
				missing = append(missing, k)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			t.Errorf("configuration.md does not document these %s keys: %s", kind, strings.Join(missing, ", "))
		}
	}
}

func collectKeys(n *yaml.Node, into map[string]bool) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			into[n.Content[i].Value] = true
		}
	}
	for _, c := range n.Content {
		collectKeys(c, into)
	}
}

// structKeys lists the yaml keys of a config struct and the structs inside
// it (through pointers, slices and map values); inline structs add their keys.
func structKeys(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || depth > 8 {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, ok := f.Tag.Lookup("yaml")
			if !ok || !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if name != "" {
				out[name] = true
			}
			_ = opts // ",inline" and named fields both contribute their own keys
			walk(f.Type, depth+1)
		}
	}
	walk(t, 0)
	return out
}
