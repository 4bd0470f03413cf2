package collector

import (
	"bytes"
	"context"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestPromtoolCheckMetrics holds the metric contract: promtool's lint
// may only flag the naming that dcgm-exporter compatibility requires, on
// DCGM_* series, and nothing at all on gpuwatch_* series.
func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := testtool.Need(t, "promtool")
	snap := fullSnapshot(8, 4)
	c, err := New(Options{Source: &fakeSource{snap: snap}, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(e.Text)
	out, _ := cmd.CombinedOutput() // exit 3 when there are lint messages
	allowed := map[string]bool{
		`label names should be written in 'snake_case' not 'camelCase'`: true,
		`counter metrics should have "_total" suffix`:                   true,
		`metric name should not include type 'counter'`:                 true,
	}
	counterLint := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		name, msg, _ := strings.Cut(line, " ")
		m, ok := schema.Lookup(name)
		if !ok || !m.DCGM || !allowed[msg] {
			t.Errorf("unexpected lint: %s", line)
			continue
		}
		if strings.HasPrefix(msg, "counter") {
			counterLint[name] = true
		}
	}
	// Exactly the DCGM counters without _total are flagged for it.
	var want, got []string
	for _, m := range schema.All() {
		if m.DCGM && m.Type == schema.Counter && !strings.HasSuffix(m.Name, "_total") {
			want = append(want, m.Name)
		}
	}
	for n := range counterLint {
		got = append(got, n)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("counters flagged for _total:\n got %v\nwant %v", got, want)
	}
}
