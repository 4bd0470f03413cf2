package health

import (
	"strconv"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

var t0 = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// gf is a gpu_fault finding of job on host's GPU gpu, open from minute
// from to minute to, as the detector writes it (its allocation's GPUs
// hold that GPU).
func gf(host, job, gpu string, from, to int) *finding.Finding {
	return &finding.Finding{Pattern: schema.GPUFault, Hostname: host, Job: job, GPU: gpu, GPUs: []string{gpu},
		Start: t0.Add(time.Duration(from) * time.Minute), End: t0.Add(time.Duration(to) * time.Minute),
		Evidence: map[string]float64{"xid": 79, "xid_count": 1}}
}

// with returns f changed by fn.
func with(f *finding.Finding, fn func(f *finding.Finding)) *finding.Finding {
	fn(f)
	return f
}

func noGPU(gpus ...string) func(f *finding.Finding) {
	return func(f *finding.Finding) { f.GPU, f.GPUs = "", gpus }
}

func holders(n int, host, gpu string) []*finding.Finding {
	out := make([]*finding.Finding, n)
	for i := range out {
		out[i] = gf(host, "ns/pod-"+strconv.Itoa(i), gpu, i%7, 90)
	}
	return out
}

// TestGroupFaults: the hostile and edge cases of counting faults per GPU,
// never per holder. Each is a safe answer: a shared GPU's holders count
// once, whatever the data's spelling of the GPU, and a finding whose GPU
// cannot be told never adds more than the devices its holders had.
func TestGroupFaults(t *testing.T) {
	const a, b = "GPU-aaaa-1111", "GPU-bbbb-2222"
	app := func(f *finding.Finding) { f.Pattern = schema.AppXID }
	cases := []struct {
		name string
		fs   []*finding.Finding
		want int
	}{
		{"no findings", nil, 0},
		{"one holder", []*finding.Finding{gf("n1", "1", a, 0, 30)}, 1},
		{"three time-sliced pods, one XID", []*finding.Finding{gf("n1", "ns/a", a, 0, 90), gf("n1", "ns/b", a, 0, 90), gf("n1", "ns/c", a, 0, 90)}, 1},
		{"holders that saw it a step apart", []*finding.Finding{gf("n1", "ns/a", a, 0, 90), gf("n1", "ns/b", a, 5, 90), gf("n1", "ns/c", a, 10, 90)}, 1},
		{"holders changing while the GPU keeps faulting", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/b", a, 20, 60), gf("n1", "ns/c", a, 50, 90)}, 1},
		{"holders changing, listed backwards", []*finding.Finding{gf("n1", "ns/c", a, 50, 90), gf("n1", "ns/b", a, 20, 60), gf("n1", "ns/a", a, 0, 30)}, 1},
		{"spans that touch", []*finding.Finding{gf("n1", "ns/a", a, 0, 10), gf("n1", "ns/b", a, 10, 20)}, 1},
		{"a new fault after the GPU was quiet", []*finding.Finding{gf("n1", "1", a, 0, 10), gf("n1", "2", a, 20, 30)}, 2},
		{"a chain with a gap is two faults", []*finding.Finding{gf("n1", "1", a, 0, 10), gf("n1", "2", a, 5, 15), gf("n1", "3", a, 40, 50), gf("n1", "4", a, 45, 60)}, 2},
		{"the same finding twice", []*finding.Finding{gf("n1", "1", a, 0, 30), gf("n1", "1", a, 0, 30)}, 1},
		{"the same XID repeated, one holder", []*finding.Finding{with(gf("n1", "1", a, 0, 90), func(f *finding.Finding) { f.Evidence["xid_count"] = 40 })}, 1},
		{"different XIDs seen by overlapping holders", []*finding.Finding{gf("n1", "ns/a", a, 0, 90), with(gf("n1", "ns/b", a, 30, 90), func(f *finding.Finding) { f.Evidence["xid"] = 48 })}, 1},
		{"two GPUs of one node", []*finding.Finding{gf("n1", "1", a, 0, 30), gf("n1", "2", b, 0, 30)}, 2},
		{"two GPUs, three holders each", append(holders(3, "n1", a), holders(3, "n1", b)...), 2},
		{"one UUID on two nodes counts per node", []*finding.Finding{gf("n1", "1", a, 0, 30), gf("n2", "2", a, 0, 30)}, 2},
		{"UUID case differs", []*finding.Finding{gf("n1", "ns/a", "GPU-AAAA-1111", 0, 30), gf("n1", "ns/b", "gpu-aaaa-1111", 0, 30)}, 1},
		{"UUID padded with spaces", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/b", " "+a+"\t", 0, 30)}, 1},
		{"MIG instances of one GPU", []*finding.Finding{gf("n1", "ns/a", a+"/1", 0, 30), gf("n1", "ns/b", a+"/2", 0, 30), gf("n1", "ns/c", a+"/5", 0, 30)}, 1},
		{"a MIG instance and its parent GPU", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/b", a+"/3", 0, 30)}, 1},
		{"the device plugin's old MIG id", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/b", "MIG-"+a+"/1/0", 0, 30)}, 1},
		{"a MIG UUID does not name its parent", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/b", "MIG-11111111-2222", 0, 30)}, 2},
		{"MIG instances of two GPUs", []*finding.Finding{gf("n1", "ns/a", a+"/1", 0, 30), gf("n1", "ns/b", b+"/1", 0, 30)}, 2},
		{"time-slicing replica ids", []*finding.Finding{gf("n1", "ns/a", a+"::0", 0, 30), gf("n1", "ns/b", a+"::1", 0, 30), gf("n1", "ns/c", a+"::2", 0, 30)}, 1},
		{"vGPU copies of one pod", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/a", a, 0, 30), gf("n1", "ns/a", a+"::1", 0, 30)}, 1},
		{"missing UUID, its allocation on that GPU", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", a, 0, 30), noGPU(a))}, 1},
		{"missing UUID, MIG instance of that GPU", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", a, 0, 30), noGPU(a+"/2"))}, 1},
		{"missing UUID and GPUs, beside a known fault", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", a, 5, 30), noGPU())}, 1},
		{"missing UUID, GPUs on two boards, beside a known fault", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", a, 5, 30), noGPU(a, b))}, 1},
		{"three holders, none with a UUID", []*finding.Finding{with(gf("n1", "ns/a", "", 0, 30), noGPU()), with(gf("n1", "ns/b", "", 0, 30), noGPU()), with(gf("n1", "ns/c", "", 0, 30), noGPU())}, 1},
		{"missing UUID, GPUs on two boards each", []*finding.Finding{with(gf("n1", "1", "", 0, 30), noGPU(a, b)), with(gf("n1", "2", "", 0, 30), noGPU(b, a))}, 1},
		{"missing UUID on two nodes", []*finding.Finding{with(gf("n1", "1", "", 0, 30), noGPU()), with(gf("n2", "2", "", 0, 30), noGPU())}, 2},
		{"missing UUID long after a known fault", []*finding.Finding{gf("n1", "1", a, 0, 10), with(gf("n1", "2", "", 50, 60), noGPU())}, 2},
		{"missing UUID overlapping two known faults joins one", []*finding.Finding{gf("n1", "1", a, 0, 30), gf("n1", "2", b, 0, 30), with(gf("n1", "3", "", 10, 20), noGPU())}, 2},
		{"a UUID that is only a MIG suffix", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", "/3", 0, 30), func(f *finding.Finding) { f.GPUs = nil })}, 1},
		{"a UUID that is only a replica suffix", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", "::1", 0, 30), func(f *finding.Finding) { f.GPUs = nil })}, 1},
		{"no host", []*finding.Finding{gf("", "ns/a", a, 0, 30), gf("", "ns/b", a, 0, 30)}, 1},
		{"an application XID on the same GPU is no fault", []*finding.Finding{gf("n1", "ns/a", a, 0, 30), with(gf("n1", "ns/b", b, 0, 30), app)}, 1},
		{"only application XIDs", []*finding.Finding{with(gf("n1", "ns/a", a, 0, 30), app), with(gf("n1", "ns/b", a, 0, 30), app)}, 0},
		{"a waste finding is no fault", []*finding.Finding{with(gf("n1", "ns/a", a, 0, 30), func(f *finding.Finding) { f.Pattern = schema.CPUOnly })}, 0},
		{"nil entries", []*finding.Finding{nil, gf("n1", "ns/a", a, 0, 30), nil}, 1},
		{"an end before the start", []*finding.Finding{gf("n1", "ns/a", a, 30, 0), gf("n1", "ns/b", a, 30, 10)}, 1},
		{"zero times", []*finding.Finding{with(gf("n1", "ns/a", a, 0, 0), func(f *finding.Finding) { f.Start, f.End = time.Time{}, time.Time{} }),
			with(gf("n1", "ns/b", a, 0, 0), func(f *finding.Finding) { f.Start, f.End = time.Time{}, time.Time{} })}, 1},
		{"a thousand pods on one GPU", holders(1000, "n1", a), 1},
		{"a host name with the separator", []*finding.Finding{gf("n1|"+a, "1", a, 0, 30), gf("n1", "2", a+"|"+a, 0, 30)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := CountFaults(c.fs); got != c.want {
				t.Errorf("%d faults, want %d (groups %v)", got, c.want, GroupFaults(c.fs))
			}
			seen := map[int]bool{}
			for _, g := range GroupFaults(c.fs) {
				for _, i := range g {
					if seen[i] || c.fs[i] == nil || c.fs[i].Pattern != schema.GPUFault {
						t.Errorf("index %d grouped twice or not a gpu_fault", i)
					}
					seen[i] = true
				}
			}
		})
	}
}

// TestGroupFaultsFirstStandsForTheFault: each group lists its holders by
// start, then key, so the fault's date and the finding that stands for it
// do not depend on the order the store returned them in; groups come in
// the order of their first findings.
func TestGroupFaultsFirstStandsForTheFault(t *testing.T) {
	const a, b = "GPU-aaaa", "GPU-bbbb"
	fs := []*finding.Finding{gf("n1", "ns/c", a, 10, 90), gf("n1", "ns/b", b, 5, 40), gf("n1", "ns/z", a, 0, 90), gf("n1", "ns/a", a, 0, 90)}
	got := GroupFaults(fs)
	want := [][]int{{3, 2, 0}, {1}}
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		for j := range want[i] {
			if len(got[i]) != len(want[i]) || got[i][j] != want[i][j] {
				t.Fatalf("groups %v, want %v", got, want)
			}
		}
	}
}

// TestFaultDeviceOf: the GPU a fault is on, however the data spells it.
func TestFaultDeviceOf(t *testing.T) {
	const u = "GPU-5fa3c1d2-0b9e-4c7a-9d1e-2a3b4c5d6e7f"
	const low = "gpu-5fa3c1d2-0b9e-4c7a-9d1e-2a3b4c5d6e7f"
	for _, c := range []struct {
		gpu  string
		gpus []string
		want string
	}{
		{u, nil, low},
		{u + "/3", nil, low},
		{"MIG-" + u + "/3/0", nil, low},
		{u + "::2", nil, low},
		{"  " + u + "  ", nil, low},
		{"MIG-0a1b2c3d-aaaa", nil, "mig-0a1b2c3d-aaaa"},
		{"", []string{u + "/1", u + "/2"}, low},
		{"", []string{u, "GPU-other"}, unknownGPU},
		{"", []string{"", u}, unknownGPU},
		{"", nil, unknownGPU},
		{"/", nil, unknownGPU},
		{"::", nil, unknownGPU},
	} {
		f := &finding.Finding{Pattern: schema.GPUFault, Hostname: "n1", GPU: c.gpu, GPUs: c.gpus}
		if got := FaultDeviceOf(f); got != (FaultDevice{"n1", c.want}) {
			t.Errorf("GPU %q, GPUs %q: %+v, want %q", c.gpu, c.gpus, got, c.want)
		}
	}
}
