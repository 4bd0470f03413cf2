package collector

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sharedSnapshot is one GPU held by n Slurm jobs at once.
func sharedSnapshot(n int) *source.Snapshot {
	snap := fullSnapshot(1, 0)
	k := snap.Devices[0].Key()
	for j := 0; j < n; j++ {
		snap.Allocations = append(snap.Allocations, source.Allocation{DeviceKey: k, Scheduler: schema.SchedulerSlurm,
			HPCJob: fmt.Sprintf("%d", 1000000+j), User: fmt.Sprintf("user%d", j), Account: "acct", JobName: "train", Kind: schema.KindBatch})
	}
	return snap
}

func exposition(t *testing.T, snap *source.Snapshot) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range Render(snap) {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestExpositionLinearInHolders: every allocation_info series used to repeat
// the joined ids of all holders, so 10x the holders gave 100x the bytes.
func TestExpositionLinearInHolders(t *testing.T) {
	small, large := exposition(t, sharedSnapshot(50)), exposition(t, sharedSnapshot(500))
	ratio := float64(len(large)) / float64(len(small))
	t.Logf("/metrics of one GPU: 50 holders %d bytes, 500 holders %d bytes, ratio %.2f", len(small), len(large), ratio)
	if ratio > 12 {
		t.Fatalf("10x the holders gave %.1fx the bytes: not linear", ratio)
	}
	for _, line := range strings.Split(string(large), "\n") {
		if strings.HasPrefix(line, schema.AllocationInfo.Name+"{") && strings.Count(line, ",") > 20 {
			t.Fatalf("allocation_info series carries other holders: %.200s", line)
		}
	}
}

// TestLabelValuesCapped: a 60 KB job name (or a long list of holders) would
// break a Prometheus scrape with label_value_length_limit set; values are cut
// on a rune boundary and counted.
func TestLabelValuesCapped(t *testing.T) {
	snap := sharedSnapshot(500)
	snap.Allocations[0].JobName = strings.Repeat("é", 30000) // 60 KB, two bytes a rune
	src := &fakeSource{snap: snap}
	c, err := New(Options{Source: src, Interval: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var joined string
	for _, mf := range e.Families {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if len(l.GetValue()) > MaxLabelValueBytes || !utf8.ValidString(l.GetValue()) {
					t.Fatalf("%s{%s} value of %d bytes (valid UTF-8: %v)", mf.GetName(), l.GetName(), len(l.GetValue()), utf8.ValidString(l.GetValue()))
				}
				if mf.GetName() == schema.GPUUtil.Name && l.GetName() == schema.LabelHPCJob {
					joined = l.GetValue()
				}
			}
		}
	}
	ids := strings.Split(joined, ",")
	last := ids[len(ids)-1]
	if !strings.HasPrefix(last, "+") || len(ids)-1+atoi(t, last[1:]) != len(snap.Allocations) {
		t.Fatalf("joined holders %q: want whole ids then ,+N adding up to %d", joined, len(snap.Allocations))
	}
	if v := testutil.ToFloat64(c.truncated.WithLabelValues(schema.LabelJobName)); v != 1 {
		t.Errorf("job_name truncations counted %v, want 1", v)
	}
	if v := testutil.ToFloat64(c.truncated.WithLabelValues(schema.LabelHPCJob)); v < 1 {
		t.Errorf("hpc_job truncations counted %v, want at least 1", v)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
