package engine

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// healthScenario: the health cases. The labels come from NVIDIA's
// documentation, not from gpuwatch's thresholds:
//
//   - 3001, 8 GPUs at their power cap for the whole job: NVML's
//     clocks-event reason SW power cap (nvmlClocksEventReasonSwPowerCap),
//     every GPU alike; the simulator holds the SM clock at 78-82 % of the
//     model's maximum, so the job runs about 20 % slower: throttled, no
//     straggler.
//   - 3002, 4 GPUs, GPU 2 thermally throttled all along (SW and HW thermal
//     slowdown and HW slowdown): its SM clock at 52-56 % of the maximum,
//     the three others waiting for it at every step: a straggler on GPU
//     2, about 46 % slower.
//   - 3003, 4 GPUs, XID 79 ("GPU has fallen off the bus", a hardware
//     XID in NVIDIA's catalogue) on GPU 1 two minutes before the job
//     ended, the GPU gone: a GPU fault that ended the job.
//   - 3004, XID 13 ("Graphics Engine Exception", attributed to the user
//     application) on GPU 0 mid-job: the application's fault, never a GPU
//     fault.
//   - 3005, 4 GPUs busy at full load and temperature, no clock-event reason
//     other than none: nothing to report.
//   - 3006, 2 GPUs, row remapping failed on GPU 1 mid-job
//     (NVML_FI_DEV_REMAPPED_FAILURE; NVIDIA's memory error management
//     guide: the GPU needs a reset and, if it recurs, an RMA): a GPU fault,
//     in dcgm-exporter's default counters too (DCGM_FI_DEV_ROW_REMAP_FAILURE
//     is one of them).
//   - 3007, 2 GPUs, a double-bit (uncorrectable) ECC error on GPU 0
//     mid-job, which the driver answers by remapping the row (the
//     uncorrectable remapped rows rise; the ECC counter only where it is
//     exported): a GPU fault on both counter sets, its data suspect.
const healthScenario = `
name: health
fleet:
  - {hostname: pw-01, model: H100-SXM5-80GB, gpus: 8}
  - {hostname: th-01, model: A100-SXM4-80GB, gpus: 4}
  - {hostname: xf-01, model: H100-SXM5-80GB, gpus: 4}
  - {hostname: ap-01, model: A100-SXM4-80GB, gpus: 2}
  - {hostname: ok-01, model: H100-SXM5-80GB, gpus: 4}
  - {hostname: rr-01, model: A100-SXM4-80GB, gpus: 2}
  - {hostname: db-01, model: H100-SXM5-80GB, gpus: 2}
workloads:
  - {id: "3001", user: ann, team: llm, job_name: capped, node: pw-01, gpus: [0, 1, 2, 3, 4, 5, 6, 7], start: 0s, duration: 3h, behaviour: training}
  - {id: "3002", user: ben, team: llm, job_name: ddp, node: th-01, gpus: [0, 1, 2, 3], start: 0s, duration: 3h, behaviour: training}
  - {id: "3003", user: cat, team: llm, job_name: lost, node: xf-01, gpus: [0, 1, 2, 3], start: 0s, duration: 90m, behaviour: training}
  - {id: "3004", user: dan, team: vision, job_name: buggy, node: ap-01, gpus: [0, 1], start: 0s, duration: 3h, behaviour: training}
  - {id: "3005", user: eve, team: vision, job_name: hot, node: ok-01, gpus: [0, 1, 2, 3], start: 0s, duration: 3h, behaviour: training}
  - {id: "3006", user: fay, team: nlp, job_name: remap, node: rr-01, gpus: [0, 1], start: 0s, duration: 3h, behaviour: training}
  - {id: "3007", user: gus, team: nlp, job_name: ecc, node: db-01, gpus: [0, 1], start: 0s, duration: 3h, behaviour: training}
faults:
  - {kind: power_throttle, node: pw-01, gpus: [0, 1, 2, 3, 4, 5, 6, 7], at: 0s}
  - {kind: thermal_throttle, node: th-01, gpus: [2], at: 0s}
  - {kind: xid, node: xf-01, gpus: [1], at: 88m, xid: 79}
  - {kind: gpu_lost, node: xf-01, gpus: [1], at: 88m30s}
  - {kind: xid, node: ap-01, gpus: [0], at: 60m, xid: 13}
  - {kind: row_remap_failure, node: rr-01, gpus: [1], at: 70m}
  - {kind: ecc_dbe, node: db-01, gpus: [0], at: 80m}
`

// The scenario's slowdowns: 1 − the simulator's mean SM clock share under
// each throttle (exporter/sim gpuSamples).
const (
	powerCapSlowdown = 1 - 0.80
	thermalSlowdown  = 1 - 0.54
)

const healthSpan = 3*time.Hour + 10*time.Minute

func healthFindings(t *testing.T, f simload.Format) ([]finding.Finding, uuids) {
	t.Helper()
	db, origin := healthDB(t, f)
	e, err := New(Options{Querier: db, Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := e.Analyze(context.Background(), origin, origin.Add(healthSpan))
	if err != nil {
		t.Fatal(err)
	}
	ls, err := db.Series(context.Background(), schema.GPUUtil.Name, origin, origin.Add(healthSpan))
	if err != nil {
		t.Fatal(err)
	}
	ids := uuids{}
	for _, l := range ls {
		host := l[schema.LabelHostname]
		if host == "" {
			host = l["Hostname"] // dcgm-exporter's spelling
		}
		ids[string(host)+"/"+string(l[schema.LabelGPU])] = string(l[schema.LabelUUID])
	}
	return fs, ids
}

// uuids maps "host/index" to the GPU's UUID, as the replayed series carry it.
type uuids map[string]string

// TestHealthFaultAttributionInCycles: the daemon's incremental cycles
// save the job that ended of XID 79 as ended by it, as the one-shot
// analysis reports it. No step after the end shows the finding open, so
// the cycle in which the job ends must save its last form.
func TestHealthFaultAttributionInCycles(t *testing.T) {
	db, origin := healthDB(t, simload.Format{})
	st := openStore(t)
	e, err := New(Options{Querier: db, Store: st, Config: config.Default(), WarmUp: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for at := origin.Add(5 * time.Minute); !at.After(origin.Add(healthSpan)); at = at.Add(5 * time.Minute) {
		if _, err := e.Cycle(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := st.FindingsBetween(ctx, origin, origin.Add(healthSpan))
	if err != nil {
		t.Fatal(err)
	}
	got := byJob(fs)
	f, ok := got["3003"][schema.GPUFault]
	if !ok || f.Evidence["ended_by_fault"] != 1 || f.Evidence["xid"] != 79 {
		t.Fatalf("3003's gpu_fault as the store holds it: %v %v, want XID 79 ended_by_fault", ok, f.Evidence)
	}
	if f, ok := got["3004"][schema.GPUFault]; ok {
		t.Errorf("the application's XID 13 saved as a GPU fault: %v", f.Evidence)
	}
}

// healthDB replays the health scenario in format f into an embedded TSDB.
func healthDB(t *testing.T, f simload.Format) (*embedded.DB, time.Time) {
	t.Helper()
	origin := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	sc, err := sim.ParseScenario("health.yaml", []byte(healthScenario))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	app := db.Appender()
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 1, Origin: origin, From: 30 * time.Second, To: healthSpan, Resolution: 30 * time.Second},
		f.Sink(func(ts time.Time, fams []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, fams) })); err != nil {
		t.Fatal(err)
	}
	return db, origin
}

func byJob(fs []finding.Finding) map[string]map[schema.Pattern]finding.Finding {
	out := map[string]map[schema.Pattern]finding.Finding{}
	for _, f := range fs {
		if out[f.Job] == nil {
			out[f.Job] = map[schema.Pattern]finding.Finding{}
		}
		out[f.Job][f.Pattern] = f
	}
	return out
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// TestHealthFindings runs the health scenario in gpuwatch's own counters
// and checks every label.
func TestHealthFindings(t *testing.T) {
	fs, ids := healthFindings(t, simload.Format{})
	checkHealth(t, fs, ids, true)
}

// TestHealthFindingsDCGMDefault: the same scenario in dcgm-exporter's
// default counters, which have the SM clock, the last XID and the row-remap
// counters but no clock-event reasons and no violation counters: the
// straggler is found by its clock, the XIDs by the gauge; uniform
// throttling cannot be told from a slower board without a reason, and is
// not reported.
func TestHealthFindingsDCGMDefault(t *testing.T) {
	fs, ids := healthFindings(t, simload.Format{Stock: true, Counters: simload.DCGMDefault, Host: schema.LabelHostname})
	checkHealth(t, fs, ids, false)
}

func checkHealth(t *testing.T, fs []finding.Finding, ids uuids, reasons bool) {
	t.Helper()
	got := byJob(fs)
	for _, f := range fs {
		if f.Pattern.Health() && (f.WastedGPUHours != 0 || f.Action != schema.ActionNotify) {
			t.Errorf("%s: wastes %.2f GPU-hours, action %s; a health finding is never waste and only notifies", f.Key(), f.WastedGPUHours, f.Action)
		}
		t.Logf("%s %s gpu=%s evidence=%v", f.Job, f.Pattern, f.GPU, f.Evidence)
	}
	// 3001: throttled by the power cap, no straggler.
	if f, ok := got["3001"][schema.Throttled]; !reasons {
		if ok {
			t.Errorf("throttled without any reason signal: %v", f.Evidence)
		}
	} else if !ok {
		t.Errorf("power-capped 8-GPU job: no throttled finding")
	} else {
		if f.Evidence["reason_"+schema.ReasonSWPowerCap] != 1 || f.Evidence["throttled_gpus"] != 8 {
			t.Errorf("power-capped job: evidence %v, want 8 GPUs under sw_power_cap", f.Evidence)
		}
		if !within(f.Evidence["slowdown"], powerCapSlowdown, 0.2) {
			t.Errorf("power-capped job: slowdown %.3f, want %.2f ± 20 %%", f.Evidence["slowdown"], powerCapSlowdown)
		}
		if f.Evidence[schema.EvidenceDegraded] <= 0 {
			t.Errorf("power-capped job: no degraded GPU-hours")
		}
	}
	if _, ok := got["3001"][schema.Straggler]; ok {
		t.Errorf("power-capped job: a straggler, though all GPUs throttle alike")
	}
	// 3002: straggler on GPU 2.
	if f, ok := got["3002"][schema.Straggler]; !ok {
		t.Errorf("thermal straggler: not found")
	} else {
		if f.GPU == "" || (reasons && f.Evidence["reason_"+schema.ReasonSWThermalSlowdown] == 0) {
			t.Errorf("straggler: GPU %q evidence %v, want the throttled GPU under a thermal reason", f.GPU, f.Evidence)
		}
		if !within(f.Evidence["slowdown"], thermalSlowdown, 0.2) {
			t.Errorf("straggler: slowdown %.3f, want %.2f ± 20 %%", f.Evidence["slowdown"], thermalSlowdown)
		}
	}
	if _, ok := got["3002"][schema.Throttled]; ok {
		t.Errorf("one throttled GPU of four reported as a throttled job, not a straggler")
	}
	// 3003: ended by XID 79.
	if f, ok := got["3003"][schema.GPUFault]; !ok {
		t.Errorf("XID 79: no gpu_fault")
	} else if f.Evidence["xid"] != 79 || f.Evidence["ended_by_fault"] != 1 {
		t.Errorf("XID 79: evidence %v, want xid 79 and ended_by_fault", f.Evidence)
	}
	// 3004: the application's XID 13, never the GPU's.
	if f, ok := got["3004"][schema.AppXID]; !ok || f.Evidence["xid"] != 13 {
		t.Errorf("XID 13: app_xid %v (found %v)", f.Evidence, ok)
	}
	if _, ok := got["3004"][schema.GPUFault]; ok {
		t.Errorf("XID 13 blamed on the GPU")
	}
	// 3006: row remapping failed on GPU 1; 3007: an uncorrectable ECC
	// error on GPU 0. Both are the GPU's, on the GPU that had them.
	for _, c := range []struct {
		job, host, gpu, key string
	}{{"3006", "rr-01", "1", "row_remap_failure"}, {"3007", "db-01", "0", "remap_uncorrectable"}} {
		f, ok := got[c.job][schema.GPUFault]
		if !ok {
			t.Errorf("job %s: no gpu_fault for its %s", c.job, c.key)
			continue
		}
		if f.Evidence[c.key] <= 0 || f.Evidence["ended_by_fault"] != 0 || f.GPU != ids[c.host+"/"+c.gpu] || f.GPU == "" {
			t.Errorf("job %s: gpu_fault on %s, evidence %v; want %s on GPU %s, the job not ended by it", c.job, f.GPU, f.Evidence, c.key, c.gpu)
		}
		if _, ok := got[c.job][schema.AppXID]; ok {
			t.Errorf("job %s: a memory fault taken for the application's", c.job)
		}
	}
	// 3005: healthy.
	for p := range got["3005"] {
		if p.Health() {
			t.Errorf("healthy hot job: %s", p)
		}
	}
	for job, ps := range got {
		for p := range ps {
			if p == schema.CPUOnly || p == schema.Stuck || p == schema.IdleSession {
				t.Errorf("job %s: reclaiming pattern %s on a busy job", job, p)
			}
		}
	}
}
