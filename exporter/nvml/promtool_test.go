package nvml

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestScrapePassesPromtoolLint runs the NVML source (GPM, MIG, XID and all)
// through the real collector and checks the exposition with promtool: only
// the naming that dcgm-exporter compatibility requires may be flagged, and
// only on DCGM_* series.
func TestScrapePassesPromtoolLint(t *testing.T) {
	promtool := testtool.Need(t, "promtool")
	f := newFake(t, dgxh100.New(), fakeOptions{procs: 4, links: 18, gpm: true})
	f.addMIG(t, 7, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE)
	s := open(t, f, Options{})
	f.xid(3, 79)
	c, err := collector.New(collector.Options{Source: s, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var text []byte
	for i := 1; i <= 2; i++ {
		f.tick(i)
		e, err := c.CollectOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		text = e.Text
	}
	for _, m := range []*schema.Metric{schema.ProfSMActive, schema.NVLinkBW, schema.GPUUp, schema.XIDLast} {
		if !bytes.Contains(text, []byte("\n"+m.Name+"{")) {
			t.Errorf("scrape lacks %s", m.Name)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, _ := cmd.CombinedOutput() // exit 3 when there are lint messages
	allowed := map[string]bool{
		`label names should be written in 'snake_case' not 'camelCase'`: true,
		`counter metrics should have "_total" suffix`:                   true,
		`metric name should not include type 'counter'`:                 true,
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		name, msg, _ := strings.Cut(line, " ")
		if m, ok := schema.Lookup(name); !ok || !m.DCGM || !allowed[msg] {
			t.Errorf("unexpected lint: %s", line)
		}
	}
}
