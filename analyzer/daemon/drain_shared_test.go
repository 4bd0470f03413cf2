package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sharedGPUScenario: one node; its GPU 0 is time-sliced between three
// pods (the scenario's infer-a and, in dcgm-exporter's virtual-GPU
// series, infer-b and infer-c), GPU 1 is train-d's alone. XID 79 on the
// shared GPU at 60m is one fault of one board, whatever its holders; XID
// 48 on GPU 1 at 180m is the node's second fault.
const sharedGPUScenario = `
name: shared-gpu-fault
fleet:
  - {hostname: %[1]s, model: H100-SXM5-80GB, gpus: 4}
workloads:
  - {id: infer-a, scheduler: kubernetes, namespace: %[2]s, container: main, user: ann, team: inf, node: %[1]s, gpus: [0], start: 0s, duration: 5h, behaviour: training}
  - {id: train-d, scheduler: kubernetes, namespace: %[2]s, container: main, user: dan, team: inf, node: %[1]s, gpus: [1], start: 0s, duration: 5h, behaviour: training}
faults:
  - {kind: xid, node: %[1]s, gpus: [0], at: 60m, xid: 79}
  - {kind: xid, node: %[1]s, gpus: [1], at: 180m, xid: 48}
`

// sharedGPURun replays sharedGPUScenario on node as stock dcgm-exporter
// with --kubernetes-virtual-gpus publishes it (the shared GPU's series
// once per pod, with a vgpu label), runs the daemon over it with
// out_of_service (faults: 2) taking the node out through act, and checks
// what every surface counts: three holders' findings of the XID 79, one
// fault in the drain, the fleet report and the fault metric, the node
// taken out only once the second GPU faults.
func sharedGPURun(t *testing.T, node, ns string, act action.Actuator, out func() bool) {
	t.Helper()
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	pods := []simload.Pod{{Name: "infer-b", Namespace: ns, Container: "main"}, {Name: "infer-c", Namespace: ns, Container: "main"}}
	shape := func(next simload.Sink) simload.Sink {
		return simload.TimeSliced{Host: node, GPU: 0, Pods: pods}.Sink(simload.Format{Stock: true}.Sink(next))
	}
	r, d := engineRigShaped(t, fmt.Sprintf(sharedGPUScenario, node, ns), origin, 0, 0, shape)
	counts := map[time.Duration][2]float64{} // after each cycle: fault metric, gpu_fault findings
	taken, got := outOfServiceRun(t, r, d, origin, schema.SchedulerKubernetes, act, func() bool {
		counts[d.Now().Sub(origin)] = faultSeries(t, r, node)
		return out()
	}, "2 hardware faults")
	// Live from 2h: XID 48 at 180m is the second fault, seen in the cycle
	// that ends at it. Three findings of one XID 79 never took it out,
	// neither in the dry run nor live.
	want := []string{"3h0m0s:intended:" + ns + "/train-d", "3h0m0s:done:" + ns + "/train-d"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("out-of-service audit:\n got %v\nwant %v", got, want)
	}
	if len(taken) != 1 || !taken[3*time.Hour] {
		t.Errorf("node taken out after the cycles at %v, want +3h only", taken)
	}
	checkSharedDetail(t, r, ns)
	holders := sharedHolders(t, r, origin, ns)
	if len(holders) != 3 {
		t.Fatalf("XID 79 on the shared GPU gave the findings %v, want one per holder (infer-a, infer-b, infer-c)", holders)
	}
	for at, want := range map[time.Duration][2]float64{2*time.Hour + 30*time.Minute: {1, 3}, 4 * time.Hour: {2, 4}} {
		if c := counts[at]; c != want {
			t.Errorf("at +%s: %s %v and %v gpu_fault findings, want %v and %v", at, schema.AnalyzerGPUFaults.Name, c[0], c[1], want[0], want[1])
		}
	}
	checkSharedReport(t, r, origin, node)
}

// faultSeries reads the daemon's fault metric and gpu_fault findings gauge
// for node.
func faultSeries(t *testing.T, r *rig, node string) [2]float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out [2]float64
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if labelOf(m, schema.LabelHostname) != node {
				continue
			}
			switch {
			case mf.GetName() == schema.AnalyzerGPUFaults.Name:
				out[0] += m.GetGauge().GetValue()
			case mf.GetName() == schema.AnalyzerFindings.Name && labelOf(m, schema.LabelPattern) == string(schema.GPUFault):
				out[1] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkSharedDetail: the step that took the node out says the shared GPU
// counted once.
func checkSharedDetail(t *testing.T, r *rig, ns string) {
	t.Helper()
	evs, err := r.log.Events(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.Step == action.StepDrain && e.State == audit.Done && !strings.Contains(e.Detail, "a shared GPU's holders counted as one fault") {
			t.Errorf("%s/train-d: detail %q does not say the shared GPU counted once", ns, e.Detail)
		}
	}
}

// sharedHolders are the jobs of the stored gpu_fault findings with XID 79:
// one GPU's holders.
func sharedHolders(t *testing.T, r *rig, origin time.Time, ns string) map[string]string {
	t.Helper()
	fs, err := r.st.FindingsBetween(context.Background(), origin, origin.Add(6*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	holders := map[string]string{}
	for _, f := range fs {
		if f.Pattern == schema.GPUFault && f.Evidence["xid"] == 79 {
			holders[f.Job] = f.GPU
		}
	}
	gpu := holders[ns+"/infer-a"]
	for job, g := range holders {
		if g != gpu || gpu == "" {
			t.Errorf("%s's fault is on GPU %q, infer-a's on %q: not one GPU", job, g, gpu)
		}
	}
	return holders
}

// checkSharedReport: the fleet report's health row counts the node's two
// faults, not its four gpu_fault findings.
func checkSharedReport(t *testing.T, r *rig, origin time.Time, node string) {
	t.Helper()
	cfg := &report.Config{}
	cfg.Defaults()
	rep, err := (&report.Builder{Data: r.st, Config: cfg, Now: func() time.Time { return origin.Add(6 * time.Hour) }}).
		Build(context.Background(), report.DayOf(origin, time.UTC), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.FleetHealth {
		if row.Hostname == node {
			if row.Faults != 2 {
				t.Errorf("fleet health counts %d faults on %s, want 2 (the shared GPU's once)", row.Faults, node)
			}
			return
		}
	}
	t.Errorf("fleet health %+v lacks %s", rep.FleetHealth, node)
}

// recordingActuator takes nodes out by recording them: the decision under
// test is the drainer's, not an API server's (the real control plane's
// cordon is TestSharedGPUFaultOnRealControlPlane's).
type recordingActuator struct {
	mu    sync.Mutex
	nodes []string
}

func (a *recordingActuator) Name() string { return "recording" }

func (a *recordingActuator) Act(_ context.Context, req *action.Request) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.nodes = append(a.nodes, req.Finding.Hostname)
	return "recorded", nil
}

func (a *recordingActuator) Reconcile(context.Context, *action.Request) (action.Outcome, string, error) {
	return action.Unknowable, "recorded", nil
}

// TestSharedGPUFaultCountsOnce: one XID 79 on a GPU time-sliced between
// three pods is one fault: with out_of_service.faults 2 the node stays in
// service until another GPU faults, and the fleet report and the fault
// metric count the shared GPU once while each holder keeps its finding.
func TestSharedGPUFaultCountsOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("replays 5.5 simulated hours")
	}
	act := &recordingActuator{}
	seen := 0
	sharedGPURun(t, "shared-01", "inference", act, func() bool {
		act.mu.Lock()
		defer act.mu.Unlock()
		n := len(act.nodes)
		taken := n > seen
		seen = n
		return taken
	})
	for _, n := range act.nodes {
		if n != "shared-01" {
			t.Errorf("took %s out", n)
		}
	}
}
