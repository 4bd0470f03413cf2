package detect

import (
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

const step = 5 * time.Minute

const a100 = "NVIDIA A100-SXM4-80GB"

// gpuFn gives one GPU's features at step i (nil: the device has no data).
type gpuFn func(i int) *features.GPU

func busy(i int) *features.GPU {
	return &features.GPU{Samples: 10, HasUtil: true, UtilAvg: 90, UtilMax: 97, HasFB: true,
		FBMaxMiB: 40000, FBTotalMiB: 81920, Model: a100, HasPowerW: true, PowerW: 320, HasLimit: true, PowerLimitW: 400, HasSM: true, SMAvg: 0.75, HasDRAM: true, DRAMAvg: 0.4}
}

func idle(fb float64) gpuFn {
	return func(int) *features.GPU {
		return &features.GPU{Samples: 10, HasUtil: true, HasFB: true, FBMaxMiB: fb, FBTotalMiB: 81920,
			Model: a100, HasPowerW: true, PowerW: 48, HasLimit: true, PowerLimitW: 400, HasSM: true, HasDRAM: true}
	}
}

// mig strips util, as DCGM publishes MIG instances: SM activity decides.
func mig(f gpuFn) gpuFn {
	return func(i int) *features.GPU {
		g := f(i)
		g.HasUtil, g.UtilAvg, g.UtilMax, g.HasPowerW = false, 0, 0, false
		return g
	}
}

func spin(i int) *features.GPU {
	return &features.GPU{Samples: 10, HasUtil: true, UtilAvg: 99.5, UtilMax: 100, HasFB: true,
		FBMaxMiB: 40000, FBTotalMiB: 81920, Model: a100, HasPowerW: true, PowerW: 64, HasLimit: true, PowerLimitW: 400, HasSM: true, SMAvg: 0.017, HasDRAM: true, DRAMAvg: 0.003}
}

// ncclHang is a rank waiting in a hung collective as the field reads it:
// one block per NCCL channel resident and spinning, so SM activity in the
// low tenths (24 channels of an A100's 108 SMs), tensor and DRAM activity
// near 0, util pinned, power a little over idle.
func ncclHang(i int) *features.GPU {
	g := spin(i)
	g.SMAvg, g.HasTensor, g.TensorAvg, g.PowerW = 0.22, true, 0.001, 82
	return g
}

// smallBatch is inference at batch size 1: kernels resident nearly all the
// time and SM activity in the same low tenths as a hang, but streaming its
// weights (DRAM activity, memory-copy util) and running its matrix
// multiplies on the tensor pipes, power well above idle.
func smallBatch(i int) *features.GPU {
	g := ncclHang(i)
	g.UtilAvg, g.SMAvg, g.DRAMAvg, g.TensorAvg = 96, 0.21, 0.19, 0.08
	g.HasMemCopy, g.MemCopyAvg, g.PowerW = true, 16, 150+float64(i%5)*10
	return g
}

// with changes one reading of a GPU function.
func with(f gpuFn, set func(*features.GPU)) gpuFn {
	return func(i int) *features.GPU {
		g := f(i)
		set(g)
		return g
	}
}

// phases switches behaviour at step boundaries: phases(a, 10, b) is a for
// steps 0-9, then b.
func phases(a gpuFn, at int, b gpuFn) gpuFn {
	return func(i int) *features.GPU {
		if i < at {
			return a(i)
		}
		return b(i)
	}
}

func strip(f gpuFn, noPower, noProf bool) gpuFn {
	return func(i int) *features.GPU {
		g := f(i)
		if g == nil {
			return nil
		}
		if noPower {
			g.HasPowerW, g.PowerW, g.HasLimit = false, 0, false
		}
		if noProf {
			g.HasSM, g.SMAvg, g.HasDRAM, g.DRAMAvg, g.HasTensor, g.TensorAvg = false, 0, false, 0, false, 0
		}
		return g
	}
}

func gap(f gpuFn, from, to int) gpuFn {
	return func(i int) *features.GPU {
		if i >= from && i < to {
			return nil
		}
		return f(i)
	}
}

type job struct {
	id, pod, kind string
	start, end    int // steps
	gpus          []gpuFn
}

// run feeds n steps of one node (plus an always-busy reference GPU, so that
// Expected is set even when the job's data is missing) and returns the
// state's findings and every step's results.
func feed(t *testing.T, cfg config.Config, n int, jobs ...job) ([]finding.Finding, []Result) {
	t.Helper()
	return feedState(t, cfg, NewState(), n, jobs...)
}

// feedState is feed into st.
func feedState(t *testing.T, cfg config.Config, st *State, n int, jobs ...job) ([]finding.Finding, []Result) {
	t.Helper()
	d := New(cfg)
	var results []Result
	for i := 0; i < n; i++ {
		s := features.Step{Start: t0.Add(time.Duration(i) * step), End: t0.Add(time.Duration(i+1) * step),
			DeviceSamples: map[string]float64{}, Info: map[string]features.Info{}}
		ref := busy(i)
		ref.Host, ref.Device, ref.UUID = "n1", "GPU-ref", "GPU-ref"
		s.GPUs = append(s.GPUs, *ref)
		for ji, j := range jobs {
			for gi, f := range j.gpus {
				dev := "GPU-" + string(rune('a'+ji)) + string(rune('0'+gi))
				if i < j.start || i >= j.end {
					g := idle(0)(i) // the device reports, unallocated
					g.Host, g.Device, g.UUID = "n1", dev, dev
					s.GPUs = append(s.GPUs, *g)
					continue
				}
				g := f(i - j.start)
				if g == nil {
					continue
				}
				g.Host, g.Device, g.UUID = "n1", dev, dev
				if j.pod != "" {
					g.Pod, g.NS, g.Job = j.pod, "ns", "ns/"+j.pod
				} else {
					g.HPCJob, g.Job = j.id, j.id
				}
				s.GPUs = append(s.GPUs, *g)
				if j.kind != "" {
					s.Info[features.DeviceID("n1", dev)+"|"+g.Job] = features.Info{Kind: j.kind, User: "u", Team: "t"}
				}
			}
		}
		for _, g := range s.GPUs {
			s.DeviceSamples[features.DeviceID(g.Host, g.Device)] += g.Samples
		}
		for _, c := range s.DeviceSamples {
			s.MaxExpected = max(s.MaxExpected, c)
		}
		// Every device here is scraped at one interval: a full step is
		// the reference GPU's count.
		s.Expected = map[string]float64{}
		for d := range s.DeviceSamples {
			s.Expected[d] = s.MaxExpected
		}
		results = append(results, d.Step(st, s))
	}
	return st.Findings(nil), results
}

func patterns(fs []finding.Finding) map[string][]schema.Pattern {
	out := map[string][]schema.Pattern{}
	for _, f := range fs {
		out[f.Job] = append(out[f.Job], f.Pattern)
	}
	return out
}

func TestDetectors(t *testing.T) {
	h := 12 // steps per hour
	def := config.Default()
	tier := config.Default()
	tier.Patterns.Overlong.MaxRuntime = map[string]config.Duration{schema.KindBatch: config.Duration(48 * time.Hour)}
	cases := []struct {
		name  string
		steps int
		job   job
		want  []schema.Pattern // nil: no finding
		cfg   *config.Config   // nil: the defaults
	}{
		{"steady training", 10 * h, job{id: "1", start: 2, end: 9 * h, gpus: []gpuFn{busy, busy}}, nil, nil},
		{"short job", 2 * h, job{id: "1", start: 2, end: 4, gpus: []gpuFn{busy}}, nil, nil},
		{"cpu only", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{idle(0), idle(0)}}, []schema.Pattern{schema.CPUOnly}, nil},
		{"cpu only under threshold", 5 * h, job{id: "1", start: 2, end: 2 + 2*h - 2, gpus: []gpuFn{idle(0)}}, nil, nil},
		{"over requested", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{busy, idle(0)}}, []schema.Pattern{schema.OverRequested}, nil},
		{"stuck idle after work", 6 * h, job{id: "1", start: 2, end: 5 * h, gpus: []gpuFn{phases(busy, h, idle(40000))}}, []schema.Pattern{schema.Stuck}, nil},
		{"stall of 50 minutes is not stuck", 6 * h, job{id: "1", start: 2, end: 5 * h, gpus: []gpuFn{phases(busy, h, phases(idle(40000), h+10, busy))}}, nil, nil},
		{"hung collective", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{phases(busy, h, spin), phases(busy, h, spin)}}, []schema.Pattern{schema.Stuck}, nil},
		{"hung collective without profiling (power decides)", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{strip(phases(busy, h, spin), false, true)}}, []schema.Pattern{schema.Stuck}, nil},
		{"hung collective without power (SM/DRAM decide)", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{strip(phases(busy, h, spin), true, false)}}, []schema.Pattern{schema.Stuck}, nil},
		{"NCCL hang with its channel blocks resident", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{phases(busy, h, ncclHang), phases(busy, h, ncclHang)}}, []schema.Pattern{schema.Stuck}, nil},
		{"NCCL hang, default counters (power and memory-copy util decide)", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{strip(phases(busy, h, with(ncclHang, func(g *features.GPU) { g.HasMemCopy, g.MemCopyAvg = true, 0 })), false, true)}}, []schema.Pattern{schema.Stuck}, nil},
		{"small-batch inference is not a hang", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{smallBatch}}, nil, nil},
		{"small-batch inference at idle power, DRAM and tensor decide", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{with(smallBatch, func(g *features.GPU) { g.PowerW = 82 })}}, nil, nil},
		{"small-batch inference without DRAM activity, tensor activity decides", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{with(smallBatch, func(g *features.GPU) { g.PowerW, g.HasDRAM, g.HasMemCopy = 82, false, false })}}, nil, nil},
		{"small-batch inference, default counters (memory-copy util decides)", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{strip(with(smallBatch, func(g *features.GPU) { g.PowerW = 82 }), false, true)}}, nil, nil},
		{"data-loader stall: util drops, not a hang", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{phases(busy, h, with(ncclHang, func(g *features.GPU) { g.UtilAvg, g.UtilMax = 41, 100 }))}}, nil, nil},
		{"spin without power or profiling is not judged", 5 * h, job{id: "1", start: 2, end: 4 * h,
			gpus: []gpuFn{strip(phases(busy, h, spin), true, true)}}, nil, nil},
		{"MIG instance at work (SM activity, no util)", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{mig(busy)}}, nil, nil},
		{"MIG instance idle (SM activity, no util)", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{mig(idle(0))}}, []schema.Pattern{schema.CPUOnly}, nil},
		{"startup overhead", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{phases(idle(0), 6, busy)}}, []schema.Pattern{schema.StartupOverhead}, nil},
		{"idle notebook", 5 * h, job{pod: "jupyter-ann", start: 2, end: 4 * h, gpus: []gpuFn{phases(busy, 3, idle(3000))}}, []schema.Pattern{schema.IdleSession}, nil},
		{"interactive by allocation_info", 5 * h, job{id: "7", kind: "interactive", start: 2, end: 4 * h, gpus: []gpuFn{idle(3000)}}, []schema.Pattern{schema.IdleSession}, nil},
		{"overlong past the site's configured limit", 52 * h, job{id: "1", start: 2, end: 51 * h, gpus: []gpuFn{busy}}, []schema.Pattern{schema.Overlong}, &tier},
		{"no limit known, never overlong", 52 * h, job{id: "1", start: 2, end: 51 * h, gpus: []gpuFn{busy}}, nil, nil},
		{"service is never overlong", 52 * h, job{id: "1", kind: "service", start: 2, end: 51 * h, gpus: []gpuFn{busy}}, nil, &tier},
		{"notebook past a day without a configured limit", 30 * h, job{id: "1", kind: "interactive", start: 2, end: 29 * h, gpus: []gpuFn{busy}}, nil, nil},
		// A CUDA image that fell back to the CPU: a bare context (0.4 GiB)
		// and util 0 for days.
		{"service that never touches its GPU", 3 * 24 * h, job{pod: "embed-api-7d4b9c8f6d-x2k9q", start: 2, end: 3*24*h - 2, gpus: []gpuFn{idle(410)}}, []schema.Pattern{schema.CPUOnly}, nil},
		{"notebook that never touches its GPU", 5 * h, job{id: "8", kind: "interactive", start: 2, end: 4 * h, gpus: []gpuFn{idle(0)}}, []schema.Pattern{schema.CPUOnly, schema.IdleSession}, nil},
		// 40 idle minutes, 10 without data, 15 idle minutes: 65 minutes
		// on the wall, never an hour of known idleness.
		{"missing data is not idleness", 6 * h, job{id: "1", start: 2, end: 2 + h + 13, gpus: []gpuFn{gap(phases(busy, h, idle(40000)), h+8, h+10)}}, nil, nil},
		// 40 idle minutes, 5 without data, 40 idle minutes: the gap
		// pauses the idle clock and ends nothing, so 80 known minutes.
		{"a gap pauses the idle clock", 6 * h, job{id: "1", start: 2, end: 2 + h + 17, gpus: []gpuFn{gap(phases(busy, h, idle(40000)), h+8, h+9)}}, []schema.Pattern{schema.Stuck}, nil},
		{"cpu only survives missing data", 5 * h, job{id: "1", start: 2, end: 4 * h, gpus: []gpuFn{gap(idle(0), h, h+1)}}, []schema.Pattern{schema.CPUOnly}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := def
			if c.cfg != nil {
				cfg = *c.cfg
			}
			fs, _ := feed(t, cfg, c.steps, c.job)
			got := patterns(fs)
			jobID := c.job.id
			if c.job.pod != "" {
				jobID = "ns/" + c.job.pod
			}
			if len(got[jobID]) != len(c.want) {
				t.Fatalf("findings %v, want %v (%+v)", got, c.want, fs)
			}
			for i, p := range c.want {
				if got[jobID][i] != p {
					t.Fatalf("findings %v, want %v", got, c.want)
				}
			}
			for _, f := range fs {
				switch {
				case f.Job != jobID || f.Pattern == schema.LowUtilization:
				case f.Pattern == schema.Overlong:
					// A busy job past its limit is over the limit, not waste.
					if f.WastedGPUHours != 0 || f.Evidence["over_limit_gpu_hours"] <= 0 {
						t.Errorf("overlong: wasted %v, over the limit %v GPU-hours", f.WastedGPUHours, f.Evidence["over_limit_gpu_hours"])
					}
				case f.WastedGPUHours <= 0:
					t.Errorf("%s: wasted %v GPU-hours", f.Pattern, f.WastedGPUHours)
				}
			}
		})
	}
}

// A step with missing data yields no finding for the allocation, even
// one already open, and lists it as unknown.
func TestUnknownSuppressesFindings(t *testing.T) {
	h := 12
	j := job{id: "9", start: 0, end: 6 * h, gpus: []gpuFn{gap(idle(0), 3*h, 3*h+1)}}
	_, res := feed(t, config.Default(), 4*h, j)
	r := res[3*h]
	if len(r.Unknown) != 1 || r.Unknown[0] != AllocKey("n1", "9") {
		t.Fatalf("unknown = %v", r.Unknown)
	}
	for _, f := range r.Open {
		if f.Job == "9" {
			t.Fatalf("finding on unknown data: %+v", f)
		}
	}
	// Before the gap the job (started at the first step, so its start is
	// unknown, and holding no memory) was flagged cpu_only.
	found := false
	for _, f := range res[3*h-1].Open {
		found = found || (f.Job == "9" && f.Pattern == schema.CPUOnly)
	}
	if !found {
		t.Fatalf("cpu_only not open before the gap: %+v", res[3*h-1].Open)
	}
}

func TestThresholdOverride(t *testing.T) {
	cfg := config.Default()
	cfg.Patterns.CPUOnly.MinDuration = config.Duration(30 * time.Minute)
	fs, _ := feed(t, cfg, 2*12, job{id: "1", start: 2, end: 14, gpus: []gpuFn{idle(0)}})
	if p := patterns(fs)["1"]; len(p) != 1 || p[0] != schema.CPUOnly {
		t.Fatalf("with a 30m threshold a 1h idle job is cpu_only, got %v", p)
	}
	cfg.Patterns.CPUOnly.Disabled = true
	fs, _ = feed(t, cfg, 2*12, job{id: "1", start: 2, end: 14, gpus: []gpuFn{idle(0)}})
	if len(fs) != 0 {
		t.Fatalf("disabled detector still fires: %+v", fs)
	}
}

func TestUsage(t *testing.T) {
	_, res := feed(t, config.Default(), 4, job{id: "1", start: 0, end: 4, gpus: []gpuFn{busy, idle(0)}})
	for i, r := range res {
		var u *struct{ a, b float64 }
		for _, x := range r.Usage {
			if x.Job == "1" {
				u = &struct{ a, b float64 }{x.AllocatedGPUHours, x.ActiveGPUHours}
			}
		}
		if u == nil {
			t.Fatalf("step %d: no usage", i)
		}
		if want := 2 * step.Hours(); abs(u.a-want) > 1e-9 || abs(u.b-want/2) > 1e-9 {
			t.Errorf("step %d: allocated %v active %v, want %v and %v", i, u.a, u.b, want, want/2)
		}
	}
}

// TestSpinIsNotUse: a spin-waiting GPU is allocated and wasted, never used,
// and used + wasted stays within allocated.
func TestSpinIsNotUse(t *testing.T) {
	_, res := feed(t, config.Default(), 12, job{id: "1", start: 0, end: 12, gpus: []gpuFn{spin, busy}})
	var alloc, used float64
	for _, r := range res {
		for _, x := range r.Usage {
			alloc += x.AllocatedGPUHours
			used += x.ActiveGPUHours
		}
	}
	if want := 12 * step.Hours(); abs(used-want) > 1e-9 || abs(alloc-2*want) > 1e-9 {
		t.Errorf("allocated %v used %v, want %v and %v (the spinning GPU unused)", alloc, used, 2*want, want)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestGuessKind(t *testing.T) {
	for _, c := range []struct{ pod, name, kind, user string }{
		{"jupyter-ann", "", schema.KindInteractive, "ann"},
		{"jupyter-ann--gpu", "", schema.KindInteractive, "ann"},
		{"", "interactive-bash", schema.KindInteractive, ""},
		{"", "sys/dashboard/sys/jupyter", schema.KindInteractive, ""},
		{"trainer-0", "", schema.KindBatch, ""},
		{"chat-api-7d9f8b6c5-x2k4p", "", schema.KindService, ""},
		{"bert-large-train-q8x2z", "", schema.KindBatch, ""},
		{"", "", schema.KindBatch, ""},
	} {
		k, u := GuessKind(c.pod, c.name)
		if k != c.kind || u != c.user {
			t.Errorf("GuessKind(%q, %q) = %q, %q; want %q, %q", c.pod, c.name, k, u, c.kind, c.user)
		}
	}
}

// The kind decides the treatment of a GPU never used, not whether it is
// found: a service (here a Deployment's pod on a stock dcgm-exporter,
// holding a bare 0.4 GiB context at util 0 for three days) is advised, a
// batch job's GPUs are reclaimed.
func TestCPUOnlyTreatmentByKind(t *testing.T) {
	h := 12
	for _, c := range []struct {
		name   string
		j      job
		kind   string
		action schema.Action
	}{
		{"service", job{pod: "embed-api-7d4b9c8f6d-x2k9q", start: 2, end: 72*h - 2, gpus: []gpuFn{idle(410)}}, schema.KindService, schema.ActionNotify},
		{"batch", job{id: "5", start: 2, end: 72*h - 2, gpus: []gpuFn{idle(410)}}, schema.KindBatch, schema.ActionReclaim},
	} {
		fs, _ := feed(t, config.Default(), 72*h, c.j)
		var got *finding.Finding
		for i := range fs {
			if fs[i].Pattern == schema.CPUOnly {
				got = &fs[i]
			}
		}
		if got == nil {
			t.Fatalf("%s: no cpu_only finding in %+v", c.name, fs)
		}
		if got.Kind != c.kind || got.Action != c.action || got.WastedGPUHours < 70 {
			t.Errorf("%s: kind %s action %s wasted %.1f GPU-hours, want %s, %s, about 72", c.name, got.Kind, got.Action, got.WastedGPUHours, c.kind, c.action)
		}
	}
}
