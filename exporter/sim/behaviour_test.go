package sim

import (
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// One node per behaviour, each job on GPUs 0..n from the origin, so each
// case reads one node.
const behaviourScenario = `
fleet:
  - hostnames: [train, bursty, infer, cpu, hung, stuck, nb-idle, nb, delay, low, partial, orphan]
    model: A100-SXM4-80GB
    gpus: 4
workloads:
  - {id: "1", user: u, team: t, node: train, gpus: [0, 1], start: 0s, duration: 2d, behaviour: training}
  - {id: "2", user: u, team: t, node: bursty, gpus: [0], start: 0s, duration: 2d, behaviour: bursty_training,
     params: {stall_every: 5m, stall: 40s}}
  - {id: "3", user: u, team: t, node: infer, gpus: [0], start: 0s, duration: 2d, behaviour: inference_daily}
  - {id: "4", user: u, team: t, node: cpu, gpus: [0, 1], start: 0s, duration: 2d, behaviour: cpu_only}
  - {id: "5", user: u, team: t, node: hung, gpus: [0, 1, 2, 3], start: 0s, duration: 2d, behaviour: hung_collective,
     params: {active: 1h}}
  - {id: "6", user: u, team: t, node: stuck, gpus: [0], start: 0s, duration: 2d, behaviour: stuck_idle,
     params: {active: 1h}}
  - {id: nb-1, scheduler: kubernetes, namespace: lab, user: u, team: t, node: nb-idle, gpus: [0], start: 0s,
     duration: 2d, behaviour: idle_notebook, params: {active: 20m}}
  - {id: nb-2, scheduler: kubernetes, namespace: lab, user: u, team: t, node: nb, gpus: [0], start: 0s,
     duration: 2d, behaviour: notebook}
  - {id: "9", user: u, team: t, node: delay, gpus: [0], start: 0s, duration: 2d, behaviour: startup_delay,
     params: {delay: 30m}}
  - {id: "10", user: u, team: t, node: low, gpus: [0], start: 0s, duration: 2d, behaviour: low_util}
  - {id: "11", user: u, team: t, node: partial, gpus: [0, 1, 2, 3], start: 0s, duration: 2d, behaviour: partial_gpus,
     params: {idle_gpus: 3}}
  - {id: "12", user: u, team: t, node: orphan, gpus: [0], start: 0s, duration: 2h, behaviour: orphan,
     params: {orphan_for: 3h}}
`

func TestBehaviourSignals(t *testing.T) {
	src, clk := newSim(t, behaviourScenario, 7)
	m, _ := LookupModel("A100-SXM4-80GB")
	type check func(t *testing.T, s *source.Snapshot)
	busy := func(t *testing.T, s *source.Snapshot, idx int) {
		t.Helper()
		d := gpu(t, s, idx)
		if u := mustValue(t, d, schema.GPUUtil); u < 85 {
			t.Errorf("GPU %d util %v, want busy (>= 85)", idx, u)
		}
		if p := mustValue(t, d, schema.PowerUsage); p < 0.6*m.MaxPowerW {
			t.Errorf("GPU %d power %v W, want > %v", idx, p, 0.6*m.MaxPowerW)
		}
		if sm := mustValue(t, d, schema.ProfSMActive); sm < 0.6 {
			t.Errorf("GPU %d SM active %v, want > 0.6", idx, sm)
		}
		if len(processesOn(s, d.Key())) != 1 {
			t.Errorf("GPU %d: want one process, got %v", idx, processesOn(s, d.Key()))
		}
	}
	idle := func(t *testing.T, s *source.Snapshot, idx int, withProcess bool) {
		t.Helper()
		d := gpu(t, s, idx)
		if u := mustValue(t, d, schema.GPUUtil); u != 0 {
			t.Errorf("GPU %d util %v, want 0", idx, u)
		}
		if p := mustValue(t, d, schema.PowerUsage); p > m.IdlePowerW*1.3 || p == m.IdlePowerW {
			t.Errorf("GPU %d power %v W, want near idle %v but not exactly it", idx, p, m.IdlePowerW)
		}
		if b := mustValue(t, d, schema.ClockEvents); uint64(b)&1 == 0 {
			t.Errorf("GPU %d: gpu_idle bit not set in %v", idx, b)
		}
		if v := mustValue(t, d, schema.ClockEventActive, "gpu_idle"); v != 1 {
			t.Errorf("GPU %d: gpuwatch_clock_event_reason_active{gpu_idle} = %v", idx, v)
		}
		procs := processesOn(s, d.Key())
		fb := mustValue(t, d, schema.FBUsed)
		if withProcess && (len(procs) != 1 || fb < 1024) {
			t.Errorf("GPU %d: want a process holding memory, got %v, FB used %v MiB", idx, procs, fb)
		}
		if !withProcess && (len(procs) != 0 || fb > 16) {
			t.Errorf("GPU %d: want no process and no memory, got %v, FB used %v MiB", idx, procs, fb)
		}
	}
	allocated := func(t *testing.T, s *source.Snapshot, idx int, job string) {
		t.Helper()
		a := allocationsOn(s, gpu(t, s, idx).Key())
		if len(a) != 1 || a[0].JobID() != job {
			t.Errorf("GPU %d: allocations %+v, want job %s", idx, a, job)
		}
	}
	cases := []struct {
		node string
		off  time.Duration
		fn   check
	}{
		{"train", 3 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			busy(t, s, 0)
			busy(t, s, 1)
			idle(t, s, 2, false)
			allocated(t, s, 0, "1")
			if nv := mustValue(t, gpu(t, s, 0), schema.ProfNVLinkTX); nv <= 0 {
				t.Errorf("multi-GPU training has no NVLink traffic")
			}
		}},
		{"cpu", 5 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			idle(t, s, 0, false)
			idle(t, s, 1, false)
			allocated(t, s, 0, "4")
			if c, ok := jobCPU(s, "4"); !ok || c < 5*3600*8 {
				t.Errorf("cpu_only job CPU seconds %v after 5h, want it burning several cores", c)
			}
		}},
		{"hung", 30 * time.Minute, func(t *testing.T, s *source.Snapshot) { busy(t, s, 0) }},
		{"hung", 5 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			for i := 0; i < 4; i++ {
				d := gpu(t, s, i)
				if u := mustValue(t, d, schema.GPUUtil); u <= 95 {
					t.Errorf("hung GPU %d util %v, want > 95", i, u)
				}
				if p := mustValue(t, d, schema.PowerUsage); p > m.IdlePowerW*1.5 {
					t.Errorf("hung GPU %d power %v W, want near idle (< %v)", i, p, m.IdlePowerW*1.5)
				}
				if sm := mustValue(t, d, schema.ProfSMActive); sm >= 0.05 {
					t.Errorf("hung GPU %d SM active %v, want < 0.05", i, sm)
				}
				if dr := mustValue(t, d, schema.ProfDRAMActive); dr >= 0.05 {
					t.Errorf("hung GPU %d DRAM active %v, want < 0.05", i, dr)
				}
				if b := mustValue(t, d, schema.ClockEvents); uint64(b)&1 != 0 {
					t.Errorf("hung GPU %d reports gpu_idle", i)
				}
			}
		}},
		{"stuck", 30 * time.Minute, func(t *testing.T, s *source.Snapshot) { busy(t, s, 0) }},
		{"stuck", 4 * time.Hour, func(t *testing.T, s *source.Snapshot) { idle(t, s, 0, true) }},
		{"nb-idle", 6 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			idle(t, s, 0, true)
			a := allocationsOn(s, gpu(t, s, 0).Key())
			if len(a) != 1 || a[0].Kind != schema.KindInteractive || a[0].Pod != "nb-1" || a[0].Namespace != "lab" ||
				a[0].Container != "main" || a[0].Scheduler != schema.SchedulerKubernetes {
				t.Errorf("notebook allocation %+v", a)
			}
		}},
		{"delay", 10 * time.Minute, func(t *testing.T, s *source.Snapshot) { idle(t, s, 0, false) }},
		{"delay", 40 * time.Minute, func(t *testing.T, s *source.Snapshot) { busy(t, s, 0) }},
		{"partial", 2 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			busy(t, s, 0)
			for i := 1; i < 4; i++ {
				idle(t, s, i, false)
				allocated(t, s, i, "11")
			}
		}},
		{"orphan", time.Hour, func(t *testing.T, s *source.Snapshot) { busy(t, s, 0); allocated(t, s, 0, "12") }},
		{"orphan", 3 * time.Hour, func(t *testing.T, s *source.Snapshot) {
			idle(t, s, 0, true)
			if a := allocationsOn(s, gpu(t, s, 0).Key()); len(a) != 0 {
				t.Errorf("allocation after the job ended: %+v", a)
			}
			p := processesOn(s, gpu(t, s, 0).Key())
			if len(p) != 1 || !p[0].Orphan || p[0].Job != "12" || p[0].MemoryBytes == 0 {
				t.Errorf("want an orphaned process of job 12 holding memory, got %+v", p)
			}
			if _, ok := jobCPU(s, "12"); ok {
				t.Errorf("an ended job still reports CPU")
			}
		}},
		{"orphan", 6 * time.Hour, func(t *testing.T, s *source.Snapshot) { idle(t, s, 0, false) }},
	}
	for _, c := range cases {
		t.Run(c.node+"@"+c.off.String(), func(t *testing.T) {
			c.fn(t, at(t, src, clk, c.off)[c.node])
		})
	}
}

// series collects one GPU-0 metric of a node over [from, to) at step.
func series(t *testing.T, node string, m *schema.Metric, from, to, step time.Duration) []float64 {
	src, clk := newSim(t, behaviourScenario, 3)
	var out []float64
	for off := from; off < to; off += step {
		s := at(t, src, clk, off)[node]
		out = append(out, mustValue(t, gpu(t, s, 0), m))
	}
	return out
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// longestRun is the longest run of consecutive values satisfying f.
func longestRun(v []float64, f func(float64) bool) int {
	best, cur := 0, 0
	for _, x := range v {
		if f(x) {
			cur++
			best = max(best, cur)
		} else {
			cur = 0
		}
	}
	return best
}

func TestBehaviourSeries(t *testing.T) {
	zero := func(x float64) bool { return x == 0 }
	t.Run("bursty_training stalls briefly and often", func(t *testing.T) {
		u := series(t, "bursty", schema.GPUUtil, time.Hour, 3*time.Hour, 10*time.Second)
		var idle int
		for _, x := range u {
			if x == 0 {
				idle++
			}
		}
		frac := float64(idle) / float64(len(u))
		if frac < 0.08 || frac > 0.2 {
			t.Errorf("stalled %.0f%% of the time, want about 40s in 5m (13%%)", 100*frac)
		}
		if r := longestRun(u, zero); r > 5 {
			t.Errorf("longest stall %d samples of 10s, want <= 40s", r)
		}
		if m := mean(u); m < 65 {
			t.Errorf("mean util %.1f, want a busy job", m)
		}
	})
	t.Run("inference_daily follows a daily cycle", func(t *testing.T) {
		u := series(t, "infer", schema.GPUUtil, 0, 24*time.Hour, time.Hour)
		if u[12]-u[0] < 40 {
			t.Errorf("util at noon %v vs midnight %v: want a daily peak", u[12], u[0])
		}
		if m := mean(u); m < 30 || m > 55 {
			t.Errorf("daily mean util %.1f, want 30-55", m)
		}
	})
	t.Run("low_util averages 10-20% on little memory", func(t *testing.T) {
		u := series(t, "low", schema.GPUUtil, time.Hour, 5*time.Hour, time.Minute)
		if m := mean(u); m < 10 || m > 20 {
			t.Errorf("mean util %.1f, want 10-20", m)
		}
		if z := longestRun(u, zero); z > 0 {
			t.Errorf("low_util went fully idle for %d samples", z)
		}
		fb := series(t, "low", schema.FBUsed, time.Hour, 2*time.Hour, 30*time.Minute)
		if fb[0] > 8*1024 || fb[0] < 1024 {
			t.Errorf("FB used %v MiB, want a small model (1-8 GiB)", fb[0])
		}
	})
	t.Run("notebook bursts at least every 30 minutes", func(t *testing.T) {
		u := series(t, "nb", schema.GPUUtil, 0, 6*time.Hour, time.Minute)
		if r := longestRun(u, zero); r > 55 {
			t.Errorf("notebook idle for %d minutes in a row, want activity at least every hour", r)
		}
		if m := mean(u); m == 0 {
			t.Errorf("notebook never active")
		}
	})
	t.Run("idle_notebook goes idle for hours after its active phase", func(t *testing.T) {
		u := series(t, "nb-idle", schema.GPUUtil, 0, 8*time.Hour, time.Minute)
		if mean(u[:20]) == 0 {
			t.Errorf("no activity in the first 20 minutes")
		}
		if r := longestRun(u[20:], zero); r != len(u)-20 {
			t.Errorf("idle run %d of %d minutes after the active phase", r, len(u)-20)
		}
	})
	t.Run("idle power is noisy, not constant", func(t *testing.T) {
		p := series(t, "cpu", schema.PowerUsage, 0, time.Hour, time.Minute)
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range p {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
		if hi-lo < 0.5 || hi-lo > 10 {
			t.Errorf("idle power spans %.2f-%.2f W, want a little noise", lo, hi)
		}
	})
	t.Run("energy integrates power", func(t *testing.T) {
		src, clk := newSim(t, behaviourScenario, 3)
		e0 := mustValue(t, gpu(t, at(t, src, clk, time.Hour)["train"], 0), schema.TotalEnergy)
		var sumW float64
		for off := time.Hour + 30*time.Second; off <= 2*time.Hour; off += 30 * time.Second {
			sumW += mustValue(t, gpu(t, at(t, src, clk, off)["train"], 0), schema.PowerUsage)
		}
		e1 := mustValue(t, gpu(t, at(t, src, clk, 2*time.Hour)["train"], 0), schema.TotalEnergy)
		want := sumW * 30 * 1000
		if math.Abs((e1-e0)-want)/want > 0.001 {
			t.Errorf("energy grew %.0f mJ over an hour, want %.0f (sum of power × 30s)", e1-e0, want)
		}
	})
}

// TestIdleNoise: with noise, idle GPUs (no process, or a process doing
// nothing) read whole 0-2 % util with the gpu_idle bit still set, boards of
// one model idle at different draws, and a busy GPU is untouched; without
// noise idle util is 0.
func TestIdleNoise(t *testing.T) {
	const body = `
    model: A100-SXM4-80GB
    gpus: 4
workloads:
  - {id: "1", user: u, node: n1, gpus: [0], duration: 2h, behaviour: stuck_idle, params: {active: 10m}}
  - {id: "2", user: u, node: n1, gpus: [1], duration: 2h, behaviour: training}
`
	noisy, clkN := newSim(t, "noise: {idle_util_percent: 2, power_jitter_w: 4, board_idle_spread: 0.1}\nfleet:\n  - hostname: n1"+body, 7)
	clean, clkC := newSim(t, "fleet:\n  - hostname: n1"+body, 7)
	seen := map[float64]int{}
	idleW := map[int]float64{}
	for off := 30 * time.Minute; off < 90*time.Minute; off += 30 * time.Second {
		n := at(t, noisy, clkN, off)["n1"]
		c := at(t, clean, clkC, off)["n1"]
		for _, idx := range []int{0, 2, 3} { // stuck (memory held) and two free GPUs
			u := mustValue(t, gpu(t, n, idx), schema.GPUUtil)
			if u != math.Trunc(u) || u < 0 || u > 2 {
				t.Fatalf("noisy idle GPU %d at %s: util %v, want a whole 0-2", idx, off, u)
			}
			seen[u]++
			if bits := mustValue(t, gpu(t, n, idx), schema.ClockEvents); int(bits)&1 == 0 {
				t.Errorf("noisy idle GPU %d lost its gpu_idle bit", idx)
			}
			if cu := mustValue(t, gpu(t, c, idx), schema.GPUUtil); cu != 0 {
				t.Errorf("clean idle GPU %d at %s: util %v", idx, off, cu)
			}
			if idx != 0 {
				idleW[idx] += mustValue(t, gpu(t, n, idx), schema.PowerUsage)
			}
		}
		if u := mustValue(t, gpu(t, n, 1), schema.GPUUtil); u < 80 {
			t.Errorf("training GPU at %s: util %v", off, u)
		}
	}
	if seen[0] == 0 || seen[1] == 0 || seen[2] == 0 {
		t.Errorf("idle util values %v: want 0, 1 and 2 each", seen)
	}
	if d := math.Abs(idleW[2]-idleW[3]) / 120; d < 0.5 {
		t.Errorf("two idle boards of one model draw %.1f W apart on average: no per-board spread", d)
	}
}
