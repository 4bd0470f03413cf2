package attribution

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/kubelet"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/kubelet/kubelettest"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/procfs"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// snapshot is what a source reports for n GPUs, before attribution.
func snapshot(n int, procs ...source.Process) *source.Snapshot {
	s := &source.Snapshot{Time: now, Hostname: "node1"}
	for i := 0; i < n; i++ {
		s.Devices = append(s.Devices, source.Device{
			Index: i, UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i), PCIBusID: fmt.Sprintf("00000000:%02X:00.0", i+1),
			Model: "NVIDIA H100 80GB HBM3", Up: true,
			Samples: []source.Sample{{Metric: schema.GPUUtil, Value: float64(10 * i)}},
		})
	}
	s.Processes = procs
	return s
}

func uuid(i int) string { return fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i) }

// series returns "name{sorted labels}" for every series of a family, sorted.
func series(fams []*dto.MetricFamily, name string, keep ...string) []string {
	var out []string
	for _, mf := range fams {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				for _, k := range keep {
					if l.GetName() == k {
						ls = append(ls, l.GetName()+"="+l.GetValue())
					}
				}
			}
			sort.Strings(ls)
			out = append(out, strings.Join(ls, ","))
		}
	}
	sort.Strings(out)
	return out
}

func attrib(t *testing.T, c *Chain, n int, procs ...source.Process) (*source.Snapshot, []*dto.MetricFamily) {
	t.Helper()
	snap := snapshot(n, procs...)
	c.Attribute(snap)
	return snap, collector.Render(snap)
}

func TestKubeletPodsOnRenderedSeries(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	k, err := kubelettest.Start(sock,
		kubelettest.Pod{Namespace: "ml", Name: "train-0", Containers: []kubelettest.Container{{Name: "main", Devices: map[string][]string{"nvidia.com/gpu": {uuid(0), uuid(1)}}}}},
		kubelettest.Pod{Namespace: "hub", Name: "jupyter-alice", Containers: []kubelettest.Container{{Name: "notebook", Devices: map[string][]string{"nvidia.com/gpu": {"2"}}}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := teams.Parse([]byte("team: {namespaces: {ml: research, hub: teaching}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := New(Options{
		Kubelet: &kubelet.Options{Socket: sock, Interval: time.Hour, Timeout: time.Second},
		Teams:   tm, ProcRoot: t.TempDir(), CgroupRoot: t.TempDir(), Registerer: reg, Clock: fixedClock{now},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)

	_, fams := attrib(t, c, 4)
	gpuLabels := []string{"gpu", "pod", "namespace", "container", "hpc_job"}
	want := []string{"container=main,gpu=0,namespace=ml,pod=train-0", "container=main,gpu=1,namespace=ml,pod=train-0",
		"container=notebook,gpu=2,namespace=hub,pod=jupyter-alice", "gpu=3"}
	if got := series(fams, schema.GPUUtil.Name, gpuLabels...); !reflect.DeepEqual(got, want) {
		t.Fatalf("GPU util series:\n got %v\nwant %v", got, want)
	}
	infoLabels := []string{"gpu", "job_id", "team", "kind", "scheduler"}
	wantInfo := []string{"gpu=0,job_id=ml/train-0,kind=batch,scheduler=kubernetes,team=research",
		"gpu=1,job_id=ml/train-0,kind=batch,scheduler=kubernetes,team=research",
		"gpu=2,job_id=hub/jupyter-alice,kind=interactive,scheduler=kubernetes,team=teaching"}
	if got := series(fams, schema.AllocationInfo.Name, infoLabels...); !reflect.DeepEqual(got, wantInfo) {
		t.Fatalf("allocation info:\n got %v\nwant %v", got, wantInfo)
	}

	// Pods come and go.
	k.SetPods(kubelettest.Pod{Namespace: "ml", Name: "train-1", Containers: []kubelettest.Container{{Name: "main", Devices: map[string][]string{"nvidia.com/gpu": {uuid(3)}}}}})
	if err := c.Kubelet().Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	_, fams = attrib(t, c, 4)
	want = []string{"container=main,gpu=3,namespace=ml,pod=train-1", "gpu=0", "gpu=1", "gpu=2"}
	if got := series(fams, schema.GPUUtil.Name, gpuLabels...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after pods changed:\n got %v\nwant %v", got, want)
	}

	// Kubelet restart: while it is away the last map is served ...
	k.Stop()
	if err := c.Kubelet().Refresh(ctx); err == nil {
		t.Fatal("refresh with the kubelet down succeeded")
	}
	_, fams = attrib(t, c, 4)
	if got := series(fams, schema.GPUUtil.Name, gpuLabels...); !reflect.DeepEqual(got, want) {
		t.Fatalf("kubelet down, last map not served:\n got %v\nwant %v", got, want)
	}
	if v := testutil.ToFloat64(c.errors.WithLabelValues(AttributorKubelet)); v != 1 {
		t.Fatalf("kubelet errors = %v, want 1", v)
	}
	// ... and a new kubelet on the same socket brings new data.
	k2, err := kubelettest.Start(sock, kubelettest.Pod{Namespace: "ml", Name: "train-2", Containers: []kubelettest.Container{{Name: "main", Devices: map[string][]string{"nvidia.com/gpu": {uuid(0)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for c.Kubelet().Refresh(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("kubelet restart not noticed within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, fams = attrib(t, c, 4)
	want = []string{"container=main,gpu=0,namespace=ml,pod=train-2", "gpu=1", "gpu=2", "gpu=3"}
	if got := series(fams, schema.GPUUtil.Name, gpuLabels...); !reflect.DeepEqual(got, want) {
		t.Fatalf("after kubelet restart:\n got %v\nwant %v", got, want)
	}
	if v := testutil.ToFloat64(c.refresh.WithLabelValues(AttributorKubelet)); v != float64(now.Unix()) {
		t.Fatalf("kubelet last refresh = %v, want %v", v, now.Unix())
	}
}

func TestAttributeNeverWaitsOnKubelet(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "kubelet.sock")
	k, err := kubelettest.Start(sock, kubelettest.Pod{Namespace: "ml", Name: "a", Containers: []kubelettest.Container{{Name: "c", Devices: map[string][]string{"nvidia.com/gpu": {uuid(0)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	c, err := New(Options{Kubelet: &kubelet.Options{Socket: sock, Interval: time.Hour, Timeout: 10 * time.Second}, ProcRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	k.Hang()
	calls := k.Calls()
	done := make(chan struct{})
	go func() { _ = c.Kubelet().Refresh(ctx); close(done) }()
	for k.Calls() == calls {
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	snap, _ := attrib(t, c, 2)
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("Attribute took %s while the kubelet hangs", d)
	}
	if len(snap.Allocations) != 1 || snap.Allocations[0].Pod != "a" {
		t.Fatalf("last map not used while the kubelet hangs: %+v", snap.Allocations)
	}
	select {
	case <-done:
		t.Fatal("the hung refresh returned before the kubelet answered")
	default:
	}
	k.Release()
	<-done
}

const podUID = "0f2a4b9c-3d1e-4f5a-8b7c-6d5e4f3a2b1c"
const cid = "3a9f1c2b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestBatchJobsProcessesAndCPU(t *testing.T) {
	dir := t.TempDir()
	proc, cg, jm := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup"), filepath.Join(dir, "jobmap")
	// Job 42 on GPUs 0-1 runs a process in its cgroup; job 43 on GPU 2 has no
	// GPU process (CPU-only) but a cgroup; job 44 on GPU 3 was never started by
	// cgroups (linuxproc) and its process carries SLURM_JOB_ID.
	writeFile(t, filepath.Join(jm, "0"), "42 user=alice uid=1000 account=physics name=train start=1764417600\n")
	writeFile(t, filepath.Join(jm, "1"), "42 user=alice uid=1000 account=physics name=train start=1764417600\n")
	writeFile(t, filepath.Join(jm, "2"), "43 user=bob account=chem name=interactive\n")
	writeFile(t, filepath.Join(jm, "3"), "44\n")
	writeFile(t, filepath.Join(cg, "system.slice/slurmstepd.scope/job_42/cpu.stat"), "usage_usec 90000000\n")
	writeFile(t, filepath.Join(cg, "system.slice/slurmstepd.scope/job_43/cpu.stat"), "usage_usec 5000000\n")
	err := procfs.WriteFixture(proc,
		procfs.FakeProcess{PID: 1001, Comm: "python", UID: 1000, Start: 10, Cgroup: "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"},
		procfs.FakeProcess{PID: 1002, Comm: "python", UID: 1000, Start: 11, Cgroup: "0::/system.slice/slurmstepd.scope/job_41/step_0/user/task_0\n"},
		procfs.FakeProcess{PID: 1003, Comm: "a.out", UID: 2000, Start: 12, Cgroup: "0::/system.slice/slurmd.service\n", Environ: []string{"SLURM_JOB_ID=44"}},
		procfs.FakeProcess{PID: 1004, Comm: "miner", UID: 3000, Start: 13, Cgroup: "0::/user.slice/user-3000.slice/session-1.scope\n"},
		procfs.FakeProcess{PID: 1005, Comm: "Xorg", UID: 0, Start: 14, Cgroup: "0::/system.slice/display-manager.service\n"},
		procfs.FakeProcess{PID: 1007, Comm: "tool", UID: 1000, Start: 15, Cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n"},
	)
	if err != nil {
		t.Fatal(err)
	}
	users := map[int]string{1000: "alice", 2000: "carol", 0: "root"}
	reg := prometheus.NewRegistry()
	c, err := New(Options{JobMapDir: jm, ProcRoot: proc, CgroupRoot: cg, Registerer: reg, Clock: fixedClock{now},
		Users: func(uid int) (string, error) {
			if n, ok := users[uid]; ok {
				return n, nil
			}
			return "", fmt.Errorf("no user %d", uid)
		}})
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshot(5,
		source.Process{DeviceKey: uuid(0), PID: 1001, Type: source.Compute, MemoryBytes: 1 << 30},
		source.Process{DeviceKey: uuid(1), PID: 1002, Type: source.Compute, MemoryBytes: 2 << 30},
		source.Process{DeviceKey: uuid(3), PID: 1003, Type: source.Compute, MemoryBytes: 3 << 30},
		source.Process{DeviceKey: uuid(4), PID: 1004, Type: source.Compute, MemoryBytes: 4 << 30},
		source.Process{DeviceKey: uuid(4), PID: 1005, Type: source.Graphics, MemoryBytes: 5 << 20},
		source.Process{DeviceKey: uuid(4), PID: 1006, Type: source.Compute, MemoryBytes: 6 << 20}, // exited
		// No cgroup, no SLURM_JOB_ID, on a GPU that one batch job holds: that job's.
		source.Process{DeviceKey: uuid(1), PID: 1007, Type: source.Compute, MemoryBytes: 7 << 20},
	)
	c.Attribute(snap)
	fams := collector.Render(snap)

	if got, want := series(fams, schema.GPUUtil.Name, "gpu", "hpc_job"), []string{"gpu=0,hpc_job=42", "gpu=1,hpc_job=42", "gpu=2,hpc_job=43", "gpu=3,hpc_job=44", "gpu=4"}; !reflect.DeepEqual(got, want) {
		t.Errorf("hpc_job labels:\n got %v\nwant %v", got, want)
	}
	wantInfo := []string{
		"account=physics,gpu=0,job_id=42,job_name=train,kind=batch,scheduler=slurm,user=alice",
		"account=physics,gpu=1,job_id=42,job_name=train,kind=batch,scheduler=slurm,user=alice",
		"account=chem,gpu=2,job_id=43,job_name=interactive,kind=interactive,scheduler=slurm,user=bob",
		"gpu=3,job_id=44,kind=batch,scheduler=slurm",
	}
	sort.Strings(wantInfo)
	if got := series(fams, schema.AllocationInfo.Name, "gpu", "job_id", "user", "account", "job_name", "kind", "scheduler"); !reflect.DeepEqual(got, wantInfo) {
		t.Errorf("allocation info:\n got %v\nwant %v", got, wantInfo)
	}
	if !snap.Allocations[0].Start.Equal(time.Unix(1764417600, 0)) {
		t.Errorf("start = %v", snap.Allocations[0].Start)
	}
	wantProcs := []string{
		"command=Xorg,gpu=4,pid=1005,user=root",
		"command=a.out,gpu=3,job_id=44,pid=1003,user=carol",
		"command=miner,gpu=4,pid=1004,user=3000",
		"command=python,gpu=0,job_id=42,pid=1001,user=alice",
		"command=python,gpu=1,job_id=41,pid=1002,user=alice",
		"gpu=4,pid=1006", // exited before attribution: kept, unnamed
		"command=tool,gpu=1,job_id=42,pid=1007,user=alice",
	}
	got := series(fams, schema.ProcessMemory.Name, "gpu", "pid", "command", "user", "job_id")
	sort.Strings(wantProcs)
	if !reflect.DeepEqual(got, wantProcs) {
		t.Errorf("process series:\n got %v\nwant %v", got, wantProcs)
	}
	// Orphans: job 41 is no live allocation; the miner runs on a GPU nobody holds.
	if got, want := series(fams, schema.ProcessOrphaned.Name, "pid", "job_id"), []string{"job_id=41,pid=1002", "pid=1004"}; !reflect.DeepEqual(got, want) {
		t.Errorf("orphans:\n got %v\nwant %v", got, want)
	}
	// CPU: job 42 through its process's cgroup, job 43 found by looking, 44 has none.
	wantCPU := []source.JobCPU{{Job: "42", Seconds: 90}, {Job: "43", Seconds: 5}}
	if !reflect.DeepEqual(snap.JobCPU, wantCPU) {
		t.Errorf("JobCPU = %+v, want %+v", snap.JobCPU, wantCPU)
	}
	if v := testutil.ToFloat64(c.errors.WithLabelValues(AttributorProc)); v != 0 {
		t.Errorf("proc errors = %v after an exited process, want 0", v)
	}

	// A broken mapping file is counted and the others still attribute.
	writeFile(t, filepath.Join(jm, "2"), "43 user\n")
	snap = snapshot(5)
	c.Attribute(snap)
	if len(snap.Allocations) != 3 {
		t.Errorf("allocations with one broken file = %d, want 3", len(snap.Allocations))
	}
	if v := testutil.ToFloat64(c.errors.WithLabelValues(AttributorJobMap)); v != 1 {
		t.Errorf("jobmap errors = %v, want 1", v)
	}
	if n, err := testutil.GatherAndCount(reg, schema.AttributionErrors.Name, schema.AttributionLastRefresh.Name); err != nil || n != 6 {
		t.Errorf("registered health series = %d, %v; want 3 errors + 3 refresh", n, err)
	}
}

func TestPodProcesses(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	k, err := kubelettest.Start(sock, kubelettest.Pod{Namespace: "ml", Name: "train-0", Containers: []kubelettest.Container{{Name: "main", Devices: map[string][]string{"nvidia.com/gpu": {uuid(0)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup")
	other := "11111111-2222-3333-4444-555555555555"
	err = procfs.WriteFixture(proc,
		procfs.FakeProcess{PID: 10, Comm: "python", UID: 1000, Start: 1, Cgroup: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(podUID, "-", "_") + ".slice/cri-containerd-" + cid + ".scope\n"},
		procfs.FakeProcess{PID: 11, Comm: "leftover", UID: 1000, Start: 1, Cgroup: "0::/kubepods/besteffort/pod" + other + "/" + cid + "\n"},
		procfs.FakeProcess{PID: 12, Comm: "host-tool", UID: 1000, Start: 1, Cgroup: "0::/user.slice/user-1000.slice/session-2.scope\n"},
	)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cg, "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(podUID, "-", "_")+".slice/cpu.stat"), "usage_usec 1500000\n")
	c, err := New(Options{Kubelet: &kubelet.Options{Socket: sock, Interval: time.Hour}, ProcRoot: proc, CgroupRoot: cg,
		Users: func(int) (string, error) { return "alice", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	snap := snapshot(2,
		source.Process{DeviceKey: uuid(0), PID: 10, Type: source.Compute},
		source.Process{DeviceKey: uuid(1), PID: 11, Type: source.Compute},
		source.Process{DeviceKey: uuid(0), PID: 12, Type: source.Compute},
	)
	c.Attribute(snap)
	p0, p1 := snap.Processes[0], snap.Processes[1]
	if p0.Job != "ml/train-0" || p0.Orphan || p0.User != "alice" {
		t.Errorf("pod process = %+v", p0)
	}
	if p1.Job != "" || !p1.Orphan {
		t.Errorf("process of a pod holding no GPU = %+v, want an orphan", p1)
	}
	if p2 := snap.Processes[2]; p2.Job != "" || !p2.Orphan {
		t.Errorf("host process on a pod's GPU = %+v, want an orphan of no job", p2)
	}
	if want := []source.JobCPU{{Job: "ml/train-0", Seconds: 1.5}}; !reflect.DeepEqual(snap.JobCPU, want) {
		t.Errorf("JobCPU = %+v, want %+v", snap.JobCPU, want)
	}
}

type fakePods map[string]PodInfo

func (f fakePods) Pod(ns, name string) (PodInfo, bool) { p, ok := f[ns+"/"+name]; return p, ok }
func (f fakePods) PodByUID(uid string) (PodInfo, bool) {
	for _, p := range f {
		if p.UID == uid {
			return p, true
		}
	}
	return PodInfo{}, false
}

// TestPodMetadata: with pod metadata, team rules by pod label apply, a pod
// process is tied by UID on a shared GPU, and a CPU-only pod's cgroup is found.
func TestPodMetadata(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	shared := map[string][]string{"nvidia.com/gpu": {uuid(0) + "::0"}}
	k, err := kubelettest.Start(sock,
		kubelettest.Pod{Namespace: "ml", Name: "a", Containers: []kubelettest.Container{{Name: "c", Devices: shared}}},
		kubelettest.Pod{Namespace: "ml", Name: "b", Containers: []kubelettest.Container{{Name: "c", Devices: map[string][]string{"nvidia.com/gpu": {uuid(0) + "::1"}}}}},
	)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	uidB := "11111111-2222-3333-4444-555555555555"
	proc, cg := filepath.Join(dir, "proc"), filepath.Join(dir, "cgroup")
	if err := procfs.WriteFixture(proc, procfs.FakeProcess{PID: 7, Comm: "python", UID: 1, Start: 1,
		Cgroup: "0::/kubepods/burstable/pod" + uidB + "/" + cid + "\n"}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cg, "kubepods/besteffort/pod"+podUID+"/cpu.stat"), "usage_usec 3000000\n")
	writeFile(t, filepath.Join(cg, "kubepods/burstable/pod"+uidB+"/cpu.stat"), "usage_usec 4000000\n")
	tm, err := teams.Parse([]byte("team: {podLabel: team}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Kubelet: &kubelet.Options{Socket: sock, Interval: time.Hour}, ProcRoot: proc, CgroupRoot: cg, Teams: tm,
		Users: func(int) (string, error) { return "u", nil },
		Pods: fakePods{
			"ml/a": {Namespace: "ml", Name: "a", UID: podUID, Labels: map[string]string{"team": "vision"}},
			"ml/b": {Namespace: "ml", Name: "b", UID: uidB, Labels: map[string]string{"team": "nlp"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c.Start(ctx)
	snap := snapshot(1, source.Process{DeviceKey: uuid(0), PID: 7, Type: source.Compute})
	c.Attribute(snap)
	var got []string
	for _, a := range snap.Allocations {
		got = append(got, a.JobID()+"="+a.Team)
	}
	if want := []string{"ml/a=vision", "ml/b=nlp"}; !reflect.DeepEqual(got, want) {
		t.Errorf("allocations = %v, want %v", got, want)
	}
	if p := snap.Processes[0]; p.Job != "ml/b" || p.Orphan {
		t.Errorf("process on a shared GPU = %+v, want ml/b by its pod UID", p)
	}
	if want := []source.JobCPU{{Job: "ml/a", Seconds: 3}, {Job: "ml/b", Seconds: 4}}; !reflect.DeepEqual(snap.JobCPU, want) {
		t.Errorf("JobCPU = %+v, want %+v", snap.JobCPU, want)
	}
}
