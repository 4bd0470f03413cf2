package attribution_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/attribution"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/procfs"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// benchSource reports 8 GPUs with every per-GPU catalogue metric that has no
// extra labels (what NVML reports on an H100) and 50 GPU processes.
type benchSource struct {
	gpus, procs int
}

func (s *benchSource) Name() string { return "bench" }
func (s *benchSource) Close() error { return nil }
func (s *benchSource) Collect(context.Context) (*source.Snapshot, error) {
	snap := &source.Snapshot{Time: time.Unix(1764417600, 0), Hostname: "bench"}
	for i := 0; i < s.gpus; i++ {
		d := source.Device{Index: i, UUID: fmt.Sprintf("GPU-b0000000-0000-0000-0000-%012d", i), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", i+1),
			Model: "NVIDIA H100 80GB HBM3", Up: true, Capabilities: []string{"nvml", "gpm"}}
		for _, m := range schema.All() {
			if m.PerGPU && len(m.Labels) == 0 && m.Origin != schema.OriginAttribution {
				d.Samples = append(d.Samples, source.Sample{Metric: m, Value: float64(i)})
			}
		}
		snap.Devices = append(snap.Devices, d)
	}
	for p := 0; p < s.procs; p++ {
		snap.Processes = append(snap.Processes, source.Process{DeviceKey: snap.Devices[p%s.gpus].UUID, PID: 10000 + p, Type: source.Compute, MemoryBytes: 1 << 30})
	}
	return snap, nil
}

// fixture writes a proc root of 50 processes in 8 Slurm jobs (cgroup v2),
// the jobs' cgroups and a job map, and returns chain options reading them.
func fixture(b *testing.B, gpus, procs int) attribution.Options {
	dir := b.TempDir()
	proc, cg, jm := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup"), filepath.Join(dir, "jobmap")
	for _, d := range []string{jm} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	for g := 0; g < gpus; g++ {
		job := strconv.Itoa(1000 + g)
		if err := os.WriteFile(filepath.Join(jm, strconv.Itoa(g)), []byte(job+" user=u"+job+" uid=1000 account=acct name=train start=1764417600\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		jobDir := filepath.Join(cg, "system.slice", "slurmstepd.scope", "job_"+job)
		if err := os.MkdirAll(jobDir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(jobDir, "cpu.stat"), []byte("usage_usec 123456789\nuser_usec 1\nsystem_usec 2\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var fps []procfs.FakeProcess
	for p := 0; p < procs; p++ {
		job := strconv.Itoa(1000 + p%gpus)
		fps = append(fps, procfs.FakeProcess{PID: 10000 + p, Comm: "python", UID: 1000, Start: uint64(p + 1),
			Cgroup: "0::/system.slice/slurmstepd.scope/job_" + job + "/step_0/user/task_0\n"})
	}
	if err := procfs.WriteFixture(proc, fps...); err != nil {
		b.Fatal(err)
	}
	return attribution.Options{JobMapDir: jm, ProcRoot: proc, CgroupRoot: cg,
		Users: func(uid int) (string, error) { return "user" + strconv.Itoa(uid), nil }}
}

func newCollector(b *testing.B, attrs ...source.Attributor) *collector.Collector {
	col, err := collector.New(collector.Options{Source: &benchSource{gpus: 8, procs: 50}, Attributors: attrs, Interval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return col
}

func newChain(b *testing.B) *attribution.Chain {
	c, err := attribution.New(fixture(b, 8, 50))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkCollect measures one collection cycle (8 GPUs, 50 processes)
// without and with the attribution chain.
func BenchmarkCollect(b *testing.B) {
	ctx := context.Background()
	b.Run("plain", func(b *testing.B) {
		col := newCollector(b)
		for b.Loop() {
			if _, err := col.CollectOnce(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("attributed", func(b *testing.B) {
		col := newCollector(b, newChain(b))
		for b.Loop() {
			if _, err := col.CollectOnce(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAttributionOverhead alternates plain and attributed cycles in one
// run, so both see the same machine load, and reports medians: plain-µs and
// attributed-µs (whole cycles; the attributed one also renders the series
// attribution adds), attribute-µs (the chain's Attribute call alone), and
// overhead-% and attribute-% relative to the plain cycle (the target is
// under 10%).
func BenchmarkAttributionOverhead(b *testing.B) {
	ctx := context.Background()
	plain := newCollector(b)
	chain := newChain(b)
	attributed := newCollector(b, chain)
	src := &benchSource{gpus: 8, procs: 50}
	// Warm both: the first attributed cycle reads every file once.
	for range 3 {
		_, _ = plain.CollectOnce(ctx)
		_, _ = attributed.CollectOnce(ctx)
	}
	var tp, ta, tc []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := plain.CollectOnce(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := attributed.CollectOnce(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		snap, _ := src.Collect(ctx)
		t3 := time.Now()
		chain.Attribute(snap)
		tp, ta, tc = append(tp, t1.Sub(t0)), append(ta, t2.Sub(t1)), append(tc, time.Since(t3))
	}
	mp, ma, mc := median(tp), median(ta), median(tc)
	b.ReportMetric(float64(mp.Microseconds()), "plain-µs")
	b.ReportMetric(float64(ma.Microseconds()), "attributed-µs")
	b.ReportMetric(float64(mc.Microseconds()), "attribute-µs")
	b.ReportMetric(100*(float64(ma)-float64(mp))/float64(mp), "overhead-%")
	b.ReportMetric(100*float64(mc)/float64(mp), "attribute-%")
}

// BenchmarkAttribute measures the chain alone on one snapshot.
func BenchmarkAttribute(b *testing.B) {
	chain := newChain(b)
	src := &benchSource{gpus: 8, procs: 50}
	for b.Loop() {
		snap, _ := src.Collect(context.Background())
		chain.Attribute(snap)
	}
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
