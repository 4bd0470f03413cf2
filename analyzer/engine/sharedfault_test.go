package engine

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/health"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/schema"
)

// sharedFaultScenario: GPU 0 of ts-01 is infer-a's in the scenario and
// time-sliced with the test's pods in the series; XID 79 hits it at 60m.
// GPU 1 is train-d's alone and stays healthy.
const sharedFaultScenario = `
name: shared-fault
fleet:
  - {hostname: ts-01, model: H100-SXM5-80GB, gpus: 2}
workloads:
  - {id: infer-a, scheduler: kubernetes, namespace: inf, container: main, user: ann, team: inf, node: ts-01, gpus: [0], start: 0s, duration: 3h, behaviour: training}
  - {id: train-d, scheduler: kubernetes, namespace: inf, container: main, user: dan, team: inf, node: ts-01, gpus: [1], start: 0s, duration: 3h, behaviour: training}
faults:
  - {kind: xid, node: ts-01, gpus: [0], at: 60m, xid: 79}
`

// TestSharedGPUFaultFindings: the engine's findings on a time-sliced GPU,
// in the shapes foreign data gives it. Every holder that had the GPU when
// XID 79 hit has a gpu_fault finding of it; a pod that came after has
// none, one that left before has none; and whatever the shape, the
// findings are one fault of one GPU.
func TestSharedGPUFaultFindings(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 3 simulated hours per case")
	}
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	pod := func(name string, from, to time.Duration) simload.Pod {
		p := simload.Pod{Name: name, Namespace: "inf", Container: "main"}
		if from > 0 {
			p.From = origin.Add(from)
		}
		if to > 0 {
			p.To = origin.Add(to)
		}
		return p
	}
	both := []simload.Pod{pod("infer-b", 0, 0), pod("infer-c", 0, 0)}
	stock := simload.Format{Stock: true}
	for _, c := range []struct {
		name   string
		format simload.Format
		pods   []simload.Pod
		want   string // the jobs with a gpu_fault finding
	}{
		{"three pods from the start", stock, both, "inf/infer-a inf/infer-b inf/infer-c"},
		{"a pod that came after the XID", stock, []simload.Pod{pod("infer-b", 0, 0), pod("infer-c", 90*time.Minute, 0)},
			"inf/infer-a inf/infer-b"},
		{"a pod that left before the XID", stock, []simload.Pod{pod("infer-b", 0, 0), pod("infer-c", 0, 30*time.Minute)},
			"inf/infer-a inf/infer-b"},
		{"honor_labels false", simload.Format{Stock: true, HonorLabelsFalse: true}, both,
			"inf/infer-a inf/infer-b inf/infer-c"},
		{"dcgm-exporter's default counters", simload.Format{Stock: true, Counters: simload.DCGMDefault}, both,
			"inf/infer-a inf/infer-b inf/infer-c"},
		{"60 s scrapes", simload.Format{Stock: true, Interval: time.Minute}, both,
			"inf/infer-a inf/infer-b inf/infer-c"},
		{"gpuwatch's XID counter copied per pod", simload.Format{}, both,
			"inf/infer-a inf/infer-b inf/infer-c"},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := timeSlicedFindings(t, sharedFaultScenario, "ts-01", 3, origin, 3*time.Hour+10*time.Minute, c.format, c.pods)
			var jobs []string
			var faults []*finding.Finding
			for i := range fs {
				if f := &fs[i]; f.Pattern == schema.GPUFault {
					jobs = append(jobs, f.Job)
					faults = append(faults, f)
				}
			}
			sort.Strings(jobs)
			if got := strings.Join(jobs, " "); got != c.want {
				t.Errorf("gpu_fault findings of %q, want %q", got, c.want)
			}
			if n := health.CountFaults(faults); n != 1 {
				t.Errorf("%d faults, want 1: %v", n, health.GroupFaults(faults))
			}
		})
	}
}

// timeSlicedFindings replays scenario (its GPU 0 on host shared with pods,
// in format f) from origin over span and returns the engine's findings over
// it: the shared-GPU tests' one way to make a time-sliced fleet.
func timeSlicedFindings(t *testing.T, scenario, host string, seed int64, origin time.Time, span time.Duration, f simload.Format, pods []simload.Pod) []finding.Finding {
	t.Helper()
	db := simloadtest.Formatted(t, simloadtest.Parse(t, host+".yaml", scenario),
		simload.Options{Seed: seed, Origin: origin, From: 30 * time.Second, To: span, Resolution: 30 * time.Second},
		f.Sink, simload.TimeSliced{Host: host, GPU: 0, Pods: pods}.Sink)
	return analyzeSpan(t, db, config.Default(), origin, origin.Add(span)).Findings
}
