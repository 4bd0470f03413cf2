package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/escalation"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

const targetKubePolicy = `
dry_run: false
min_warning: 0s
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: dev
    match: {namespaces: [%s]}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 0s}]
`

// recreate deletes the pod and makes another under its name.
func recreate(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 60*time.Second, "pod "+p.Name+" deleted", func() (bool, error) {
		_, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// Creation times have a resolution of a second: the new pod's is a
	// second after the old one's (the API server shares this clock).
	time.Sleep(time.Until(p.CreationTimestamp.Add(1100 * time.Millisecond)))
	return testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName}})
}

// On the real control plane, a pod name names a candidate: the escalator
// evicts it only when the API server says it runs on the finding's node
// and was created before the evidence began. A pod on another node, or one
// recreated under the name after the evidence began, is not evicted and
// gets one target note; and a pod recreated between the decision and the
// eviction is refused by the actuator on the proof's UID.
func TestTargetProvenOnRealControlPlane(t *testing.T) {
	t.Parallel()
	admin := testkube.Admin(t)
	nodes := testkube.Nodes(t)
	if len(nodes) < 2 {
		t.Fatalf("nodes %v: want two", nodes)
	}
	for _, tc := range []struct {
		name string
		// host is the finding's node; recreated makes the pod anew after
		// the evidence began.
		host      string
		recreated bool
		want      string // in the target note; "" when evicted
	}{
		{name: "its own node, created before the evidence", host: nodes[0]},
		{name: "another node than the finding's", host: nodes[1], want: fmt.Sprintf("host %q in pod", nodes[1])},
		{name: "recreated under the name after the evidence", host: nodes[0], recreated: true, want: "created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := testkube.Namespace(t, admin, nil)
			pod := testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: ns},
				Spec: corev1.PodSpec{NodeName: nodes[0]}})
			evidence := pod.CreationTimestamp.UTC()
			if tc.recreated {
				// The evidence began as the first pod was made; the pod
				// there now was made after it, past the slack.
				evidence = evidence.Add(-target.StartSlack)
				pod = recreate(t, admin, pod)
				if !pod.CreationTimestamp.After(evidence.Add(target.StartSlack)) {
					t.Fatalf("recreated at %s, evidence from %s", pod.CreationTimestamp, evidence)
				}
			}
			esc, lg := targetKubeEscalator(t, admin, ns)
			f := finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Scheduler: schema.SchedulerKubernetes,
				Namespace: ns, Pod: pod.Name, Job: ns + "/" + pod.Name, Hostname: tc.host, Start: evidence, WastedGPUHours: 1}
			now := time.Now().UTC()
			for m := 0; m <= 10; m += 5 {
				f.End = now.Add(time.Duration(m) * time.Minute)
				if _, err := esc.Cycle(ctx, f.End, []finding.Finding{f}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := admin.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
			steps := stepCounts(t, lg, f.Job)
			if tc.want == "" {
				if err == nil && got.DeletionTimestamp == nil {
					t.Fatalf("the proven pod was not evicted: %v", steps)
				}
				if steps["reclaim:done"] != 1 || steps["warn:done"] != 1 {
					t.Fatalf("audit %v", steps)
				}
				return
			}
			if err != nil || got.UID != pod.UID || got.DeletionTimestamp != nil {
				t.Fatalf("pod %s/%s after the cycles: %v (deleting %v): another workload's evidence evicted it", ns, pod.Name, err, got.DeletionTimestamp)
			}
			if len(steps) != 2 || steps[escalation.NoteTarget+":skipped"] != 1 {
				t.Fatalf("audit %v, want one target note and no step", steps)
			}
			evs, _ := lg.Events(ctx, audit.Filter{Job: f.Job})
			if !strings.Contains(evs[len(evs)-1].Detail, tc.want) {
				t.Fatalf("target note %q does not say %q", evs[len(evs)-1].Detail, tc.want)
			}
		})
	}
}

// The pod is recreated between the decision and the eviction: the proof
// made at decision time names the old pod's UID, the actuator reads the
// new one and refuses, and the new pod is not evicted.
func TestRecreatedBetweenDecisionAndEvictionOnRealControlPlane(t *testing.T) {
	t.Parallel()
	admin := testkube.Admin(t)
	ctx := context.Background()
	ns := testkube.Namespace(t, admin, nil)
	old := testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train-0", Namespace: ns}})
	src := &kube.Facts{Core: admin.CoreV1()}
	got, err := src.Lookup(ctx, []string{ns + "/train-0"})
	if err != nil || got[ns+"/train-0"] == nil {
		t.Fatalf("facts: %v %v", got, err)
	}
	f := finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, Namespace: ns, Pod: "train-0", Job: ns + "/train-0",
		Hostname: old.Spec.NodeName, Start: old.CreationTimestamp.UTC().Add(time.Hour)}
	proof := target.Prove(&f, got[ns+"/train-0"], "")
	if !proof.OK() || proof.UID != string(old.UID) {
		t.Fatalf("proof of the old pod: %s", proof.String())
	}
	now := recreate(t, admin, old)
	for _, mode := range []string{"evict", "delete"} {
		r := &kube.Reclaim{Core: admin.CoreV1(), Apps: admin.AppsV1(), Mode: mode}
		_, err := r.Act(ctx, &action.Request{Step: action.StepReclaim, Attempt: 1, Finding: f, Target: &proof})
		if !errors.Is(err, action.ErrRefused) || !strings.Contains(err.Error(), string(old.UID)) {
			t.Fatalf("%s: %v, want refused naming the proof's uid", mode, err)
		}
	}
	p, err := admin.CoreV1().Pods(ns).Get(ctx, "train-0", metav1.GetOptions{})
	if err != nil || p.UID != now.UID || p.DeletionTimestamp != nil {
		t.Fatalf("the recreated pod: %v %v", p, err)
	}
}

func targetKubeEscalator(t *testing.T, cs kubernetes.Interface, ns string) (*Escalator, *audit.Log) {
	t.Helper()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse([]byte(fmt.Sprintf(targetKubePolicy, ns)))
	if err != nil {
		t.Fatal(err)
	}
	return &Escalator{Policy: p, Log: lg, Metrics: NewMetrics(prometheus.NewRegistry()),
		Facts: &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: cs.CoreV1()}}},
		Actuators: map[string]action.Actuator{schema.SchedulerKubernetes: &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: "evict"},
			"webhook": &fakeActuator{name: "webhook", stopped: map[string]bool{}}}}, lg
}
