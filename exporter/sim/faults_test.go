package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestThrottlingXIDScenario(t *testing.T) {
	sc, err := Builtin("throttling-xid")
	if err != nil {
		t.Fatal(err)
	}
	src, clk := newSimFrom(t, sc, 1)
	m, _ := LookupModel("H100-SXM5-80GB")
	before := at(t, src, clk, 20*time.Second)["gpu-node-01"]
	s := at(t, src, clk, 3*time.Minute)["gpu-node-01"]

	// Before any fault everything is clean.
	for i := 0; i < 8; i++ {
		d := gpu(t, before, i)
		if !d.Up {
			t.Fatalf("GPU %d down before its fault", i)
		}
		for _, met := range []*schema.Metric{schema.ThermViolation, schema.PowerViolation, schema.XIDLast,
			schema.ECCDBEVol, schema.RemapFailure, schema.PCIeReplay, schema.NVLinkCRCFlit} {
			if v := mustValue(t, d, met); v != 0 {
				t.Errorf("GPU %d: %s = %v before any fault", i, met.Name, v)
			}
		}
	}

	g0 := gpu(t, s, 0)
	if b := uint64(mustValue(t, g0, schema.ClockEvents)); b&0x40 == 0 || b&0x20 == 0 || b&0x8 == 0 {
		t.Errorf("thermal: clock event bits %#x, want hw_thermal, sw_thermal and hw_slowdown", b)
	}
	for _, r := range []string{"hw_thermal_slowdown", "sw_thermal_slowdown", "hw_slowdown"} {
		if v := mustValue(t, g0, schema.ClockEventActive, r); v != 1 {
			t.Errorf("thermal: reason %s = %v", r, v)
		}
	}
	if v := mustValue(t, g0, schema.ClockEventActive, "sw_power_cap"); v != 0 {
		t.Errorf("thermal GPU reports sw_power_cap")
	}
	if temp := mustValue(t, g0, schema.GPUTemp); temp < m.TempThrottle {
		t.Errorf("thermal: temperature %v, want >= %v", temp, m.TempThrottle)
	}
	if ns := mustValue(t, g0, schema.ThermViolation); ns != float64(150*time.Second) {
		t.Errorf("thermal violation %v ns, want 150s since 30s", ns)
	}
	if clk := mustValue(t, g0, schema.SMClock); clk > 0.6*m.SMClockMax {
		t.Errorf("thermal: SM clock %v, want throttled", clk)
	}

	g1 := gpu(t, s, 1)
	if b := uint64(mustValue(t, g1, schema.ClockEvents)); b&0x4 == 0 || b&0x40 != 0 {
		t.Errorf("power: clock event bits %#x, want sw_power_cap only", b)
	}
	if p := mustValue(t, g1, schema.PowerUsage); p < 0.97*m.PowerLimitW {
		t.Errorf("power: %v W, want at the limit %v", p, m.PowerLimitW)
	}
	if ns := mustValue(t, g1, schema.PowerViolation); ns != float64(150*time.Second) {
		t.Errorf("power violation %v ns, want 150s", ns)
	}

	// XID 79 at 60s and 180s; XID 13 at 45s, 135s.
	g2, g3 := gpu(t, s, 2), gpu(t, s, 3)
	if v := mustValue(t, g2, schema.XIDLast); v != 79 {
		t.Errorf("last XID %v, want 79", v)
	}
	if v := mustValue(t, g2, schema.XIDErrors, "79"); v != 2 {
		t.Errorf("xid 79 count %v, want 2", v)
	}
	if v := mustValue(t, g3, schema.XIDErrors, "13"); v != 2 {
		t.Errorf("xid 13 count %v, want 2", v)
	}
	if _, ok := value(g3, schema.XIDErrors, "79"); ok {
		t.Errorf("GPU 3 publishes an XID it never had")
	}

	g4 := gpu(t, s, 4)
	if v := mustValue(t, g4, schema.ECCDBEVol); v != 1 {
		t.Errorf("DBE %v, want 1", v)
	}
	if v := mustValue(t, g4, schema.RemapPending); v != 1 {
		t.Errorf("remap pending %v, want 1", v)
	}
	g5 := gpu(t, s, 5)
	if v := mustValue(t, g5, schema.RemapFailure); v != 1 {
		t.Errorf("row remap failure %v, want 1", v)
	}
	g6 := gpu(t, s, 6)
	if v := mustValue(t, g6, schema.PCIeReplay); v != 5*int64f(8) {
		t.Errorf("PCIe replays %v, want 40 (5 every 20s from 30s to 170s)", v)
	}
	if v := mustValue(t, g6, schema.NVLinkCRCData); v != 2*6 {
		t.Errorf("NVLink CRC data errors %v, want 12", v)
	}
	if g7 := gpu(t, s, 7); g7.Up || len(g7.Samples) != 0 {
		t.Errorf("GPU 7 should have fallen off the bus: up=%v, %d samples", g7.Up, len(g7.Samples))
	}
	for i := 0; i < 7; i++ {
		if !gpu(t, s, i).Up {
			t.Errorf("GPU %d down, only GPU 7 should be", i)
		}
	}
}

func int64f(v int64) float64 { return float64(v) }

func TestFaultTiming(t *testing.T) {
	min := time.Minute
	cases := []struct {
		name      string
		f         Fault
		e         time.Duration
		n         int64
		active    bool
		activeFor time.Duration
	}{
		{"before", Fault{At: 10 * min, Duration: 5 * min}, 5 * min, 0, false, 0},
		{"once, inside", Fault{At: 10 * min, Duration: 5 * min}, 12 * min, 1, true, 2 * min},
		{"once, after", Fault{At: 10 * min, Duration: 5 * min}, 30 * min, 1, false, 5 * min},
		{"for good", Fault{At: 10 * min}, 70 * min, 1, true, 60 * min},
		{"recurring, in 3rd", Fault{At: 0, Every: 10 * min, Duration: 2 * min}, 21 * min, 3, true, 5 * min},
		{"recurring, between", Fault{At: 0, Every: 10 * min, Duration: 2 * min}, 25 * min, 3, false, 6 * min},
		{"until caps", Fault{At: 0, Every: 10 * min, Duration: 2 * min, Until: 15 * min}, 45 * min, 2, false, 4 * min},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if n := c.f.occurrences(c.e); n != c.n {
				t.Errorf("occurrences = %d, want %d", n, c.n)
			}
			if a := c.f.active(c.e); a != c.active {
				t.Errorf("active = %v, want %v", a, c.active)
			}
			if d := c.f.activeTotal(c.e); d != c.activeFor {
				t.Errorf("activeTotal = %v, want %v", d, c.activeFor)
			}
		})
	}
}

func TestGPULost(t *testing.T) {
	src, clk := newSim(t, `
fleet: [{hostname: n, model: L40S, gpus: 2}]
workloads:
  - {id: "1", user: u, team: t, node: n, gpus: [1], start: 0s, duration: 1d, behaviour: training}
faults:
  - {kind: gpu_lost, node: n, gpus: [1], at: 1h, duration: 2h}
`, 1)
	cases := []struct {
		off time.Duration
		up  bool
	}{{30 * time.Minute, true}, {90 * time.Minute, false}, {4 * time.Hour, true}}
	for _, c := range cases {
		s := at(t, src, clk, c.off)["n"]
		d := gpu(t, s, 1)
		if d.Up != c.up {
			t.Errorf("at %s: GPU 1 up=%v, want %v", c.off, d.Up, c.up)
		}
		if !c.up && (len(d.Samples) != 0 || len(processesOn(s, d.Key())) != 0) {
			t.Errorf("at %s: a lost GPU still reports samples or processes", c.off)
		}
		if !c.up && len(allocationsOn(s, d.Key())) != 1 {
			t.Errorf("at %s: the job still holds a lost GPU; its allocation must stay", c.off)
		}
		if !gpu(t, s, 0).Up || len(gpu(t, s, 0).Samples) == 0 {
			t.Errorf("at %s: GPU 0 hidden by GPU 1's fault", c.off)
		}
	}
}

func TestFieldErrorHidesOnlyItsField(t *testing.T) {
	src, clk := newSim(t, `
fleet: [{hostname: n, model: H200, gpus: 2}]
faults:
  - {kind: field_error, field: power_usage, node: n, gpus: [0], at: 1m, duration: 5m}
`, 1)
	before := at(t, src, clk, 30*time.Second)["n"]
	during := at(t, src, clk, 3*time.Minute)["n"]
	after := at(t, src, clk, 7*time.Minute)["n"]
	if len(before.Errors) != 0 || len(after.Errors) != 0 {
		t.Errorf("errors outside the window: %v / %v", before.Errors, after.Errors)
	}
	if len(during.Errors) != 1 || during.Errors[0].Field != "power_usage" || during.Errors[0].DeviceKey != gpu(t, during, 0).Key() {
		t.Fatalf("errors %v, want one power_usage error on GPU 0", during.Errors)
	}
	g0, g1 := gpu(t, during, 0), gpu(t, during, 1)
	if _, ok := value(g0, schema.PowerUsage); ok {
		t.Error("the failing field is still published")
	}
	for _, d := range []*source.Device{g0, g1} {
		for _, m := range []*schema.Metric{schema.GPUUtil, schema.GPUTemp, schema.TotalEnergy} {
			mustValue(t, d, m)
		}
	}
	mustValue(t, g1, schema.PowerUsage)
	mustValue(t, gpu(t, after, 0), schema.PowerUsage)
	if !g0.Up {
		t.Error("a field error is not a lost GPU")
	}
	if _, err := ParseScenario("x.yaml", []byte("fleet: [{hostname: n, model: H200}]\nfaults: [{kind: field_error, node: n, field: fan}]\n")); err == nil ||
		!strings.Contains(err.Error(), `faults[0].field: unknown field "fan"`) {
		t.Errorf("unknown field: %v", err)
	}
}
