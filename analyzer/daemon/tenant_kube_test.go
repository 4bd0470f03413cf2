package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/schema"
)

// tenantScenario: GPU 0 of node %[1]s is time-sliced among three servers
// working at about 30 % of the device each and a notebook idle after its
// first 10 minutes, all in namespace %[2]s; the simulator publishes each
// holder's own use (shared: true), as gpuwatch's exporter does from
// NVML's per-process counters.
const tenantScenario = `
name: tenant-evict
fleet:
  - {hostname: %[1]s, model: H100-SXM5-80GB, gpus: 1}
workloads:
  - {id: serve-a, scheduler: kubernetes, namespace: %[2]s, container: main, user: ana, team: search, kind: service, node: %[1]s, gpus: [0], shared: true, start: 0s, duration: 5h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-b, scheduler: kubernetes, namespace: %[2]s, container: main, user: ana, team: search, kind: service, node: %[1]s, gpus: [0], shared: true, start: 0s, duration: 5h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-c, scheduler: kubernetes, namespace: %[2]s, container: main, user: ana, team: search, kind: service, node: %[1]s, gpus: [0], shared: true, start: 0s, duration: 5h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: jupyter-bo, scheduler: kubernetes, namespace: %[2]s, container: notebook, user: bo, team: search, kind: interactive, node: %[1]s, gpus: [0], shared: true, start: 0s, duration: 5h, behaviour: idle_notebook, params: {active: 10m, util: 30, memory_gib: 4}}
`

const tenantPolicy = `
dry_run: false
min_warning: 0s
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: shared
    match: {namespaces: [%s]}
    reclaim: true
    rules:
      - {pattern: idle_session, steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 30m}]}
      - {pattern: low_utilization, steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 30m}]}
      - {pattern: cpu_only, steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 30m}]}
`

// TestTenantOfSharedGPUEvictedAlone (issue 57): the policy acts on one
// tenant of a time-sliced GPU without touching the others. The four pods
// run on the real control plane's node, made before the evidence; the
// daemon judges each holder on its own use from the simulator's series
// and, under a policy that would reclaim any of them, evicts the idle
// notebook only: the three servers sharing its GPU keep running, with no
// step recorded for them.
func TestTenantOfSharedGPUEvictedAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := testkube.Admin(t)
	node := testkube.Nodes(t)[0]
	ns := testkube.Namespace(t, admin, nil)
	pods := map[string]*corev1.Pod{}
	for _, name := range []string{"serve-a", "serve-b", "serve-c", "jupyter-bo"} {
		pods[name] = testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node}})
	}
	// The telemetry begins after the pods were made: the targets are
	// proven (same node, created before the evidence).
	origin := time.Now().UTC().Truncate(time.Minute).Add(2 * time.Minute)
	r, d := engineRigShaped(t, fmt.Sprintf(tenantScenario, node, ns), origin, 0, 0, nil)
	p, err := policy.Parse([]byte(fmt.Sprintf(tenantPolicy, ns)))
	if err != nil {
		t.Fatal(err)
	}
	r.esc.Policy = p
	r.esc.Facts = &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: admin.CoreV1()}}}
	r.esc.Actuators[schema.SchedulerKubernetes] = &kube.Reclaim{Core: admin.CoreV1(), Apps: admin.AppsV1(), Mode: "evict"}
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5 * time.Hour)); now = now.Add(5 * time.Minute) {
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatalf("cycle at +%s: %v", now.Sub(origin), err)
		}
	}
	for name, before := range pods {
		job := ns + "/" + name
		steps := stepCounts(t, r.log, job)
		got, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		evicted := err != nil || got.UID != before.UID || got.DeletionTimestamp != nil
		if name == "jupyter-bo" {
			if !evicted || steps[action.StepReclaim+":done"] != 1 {
				t.Errorf("the idle tenant %s: evicted %v, audit %v; want evicted once", job, evicted, steps)
			}
			continue
		}
		if evicted || len(steps) > 0 {
			t.Errorf("busy tenant %s of the same GPU: evicted %v, audit %v; want untouched", job, evicted, steps)
		}
	}
	if testing.Verbose() {
		evs, _ := r.log.Events(ctx, audit.Filter{})
		for _, e := range evs {
			t.Logf("%s %s %s %s %s", e.At.Sub(origin), e.Step, e.State, e.Job, e.Detail)
		}
	}
}
