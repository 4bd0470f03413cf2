package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestHolderSeriesCappedAndCounted: a device with more holders than
// MaxHoldersPerDevice publishes the cap's worth of holder series per metric
// and counts the rest; a device without per-process use publishes none.
func TestHolderSeriesCappedAndCounted(t *testing.T) {
	// The fixture's own job 4242 and MaxHoldersPerDevice+5 more.
	snap := sharedSnapshot(MaxHoldersPerDevice + 5)
	snap.Devices[0].ProcessUse = true
	k := snap.Devices[0].Key()
	snap.Processes = append(snap.Processes, source.Process{DeviceKey: k, PID: 9, Type: source.Compute,
		MemoryBytes: 3 << 20, Job: snap.Allocations[0].HPCJob, Use: &source.ProcessUse{SM: 70}})
	src := &fakeSource{snap: snap}
	c, err := New(Options{Source: src, Interval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.CollectOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	text := string(e.Text)
	for _, m := range schema.HolderUseMetrics {
		if n := strings.Count(text, "\n"+m.Name+"{"); n != MaxHoldersPerDevice {
			t.Errorf("%s: %d series, want %d", m.Name, n, MaxHoldersPerDevice)
		}
	}
	for _, want := range []string{
		schema.HolderSMUtil.Name + `{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:10:00.0",device="nvidia0",hostname="node-a",hpc_job="4242",job_id="4242"} 0.7`,
		schema.HolderMemory.Name + `{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:10:00.0",device="nvidia0",hostname="node-a",hpc_job="4242",job_id="4242"} 3.145728e+06`,
		schema.HolderSMUtil.Name + `{gpu="0",UUID="GPU-00000000-0000-0000-0000-000000000000",pci_bus_id="00000000:10:00.0",device="nvidia0",hostname="node-a",hpc_job="1000000",job_id="1000000"} 0`,
	} {
		if !strings.Contains(text, "\n"+want+"\n") {
			t.Errorf("missing series %s; have:\n%s", want, grep(text, "job_id=\"4242\""))
		}
	}
	if v := testutil.ToFloat64(c.holdersDropped); v != 6 {
		t.Errorf("%s = %v, want 6", schema.HoldersDropped.Name, v)
	}

	// Without per-process use the same holders get no series at all.
	snap.Devices[0].ProcessUse = false
	if e, err = c.CollectOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Text), "\ngpuwatch_holder_") {
		t.Errorf("holder series without per-process use:\n%s", grep(string(e.Text), "gpuwatch_holder_"))
	}
}

func grep(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
