package facts

import (
	"os"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/schema"
)

// TestDocumentedMatchKeys: the table of match keys in docs/configuration.md
// is exactly Specs, in order.
func TestDocumentedMatchKeys(t *testing.T) {
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "<!-- match-keys -->\n")
	if !ok {
		t.Fatal("docs/configuration.md has no <!-- match-keys --> table")
	}
	var got []string
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		got = append(got, line)
	}
	var want []string
	for _, s := range schema.MatchAttrs() {
		want = append(want, "| `"+s.MatchKey+"` | "+string(s.Attr)+" | "+strings.Join(s.Sources, ", ")+" | "+s.Doc+" | "+string(s.Owner)+": "+s.Writers+" |")
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("match keys table:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
