package schema

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var snake = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func TestNamingConventions(t *testing.T) {
	for _, m := range All() {
		if m.Help == "" {
			t.Errorf("%s has no help", m.Name)
		}
		if m.DCGM {
			if !strings.HasPrefix(m.Name, "DCGM_FI_") {
				t.Errorf("%s marked DCGM without DCGM_FI_ prefix", m.Name)
			}
			continue
		}
		if !strings.HasPrefix(m.Name, "gpuwatch_") || !snake.MatchString(m.Name) {
			t.Errorf("%s: gpuwatch metrics are snake_case gpuwatch_*", m.Name)
		}
		for _, unit := range []string{"_hours", "_minutes", "_milliseconds", "_mib", "_kib", "_percent", "_celsius_"} {
			if strings.Contains(m.Name, unit) {
				t.Errorf("%s: use base units (seconds, bytes, ratio), not %s", m.Name, unit)
			}
		}
		if (m.Type == Counter) != strings.HasSuffix(m.Name, "_total") {
			t.Errorf("%s: counters and only counters end in _total", m.Name)
		}
		for _, l := range m.Labels {
			if !snake.MatchString(l) {
				t.Errorf("%s: label %q is not snake_case", m.Name, l)
			}
		}
	}
}

// TestDocsCurrent keeps the metrics reference in README.md and
// docs/metrics.md in step with the catalogue. UPDATE_DOCS=1 rewrites them.
func TestDocsCurrent(t *testing.T) {
	want := Markdown()
	for _, path := range []string{"../README.md", "../docs/metrics.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		const begin, end = "<!-- metrics:begin -->\n", "<!-- metrics:end -->"
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the %q ... %q markers", path, begin, end)
		}
		got := s[i+len(begin) : j]
		if got == want {
			continue
		}
		if os.Getenv("UPDATE_DOCS") != "" {
			if err := os.WriteFile(path, []byte(s[:i+len(begin)]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: metrics reference is out of date; run UPDATE_DOCS=1 go test ./schema", path)
	}
}
