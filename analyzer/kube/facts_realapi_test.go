package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The policy the real pods are judged by: tiers chosen by namespace labels,
// by the pod's owner kind and by pod labels; exemptions by annotation, by
// label and by team (the teams file takes the team from a pod label). The
// pod keys it matches are trusted (trust_workload_keys).
const realPolicy = `
dry_run: false
trust_workload_keys: {labels: [app.kubernetes.io/name], annotations: [gpuwatch.io/exempt]}
tiers:
  - name: production
    match: {namespace_labels: {gpuwatch.io/env: prod}}
    rules:
      - pattern: cpu_only
        steps: [{action: warn}]
  - name: batch
    match: {owners: [Job], namespace_labels: {gpuwatch.io/env: research}}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn}, {action: reclaim, after: 1h}]
  - name: notebooks
    match: {labels: {app.kubernetes.io/name: jupyterhub}, namespace_labels: {gpuwatch.io/env: research}}
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn}, {action: reclaim, after: 1h}]
  - name: services
    match: {owners: [ReplicaSet]}
    rules:
      - pattern: cpu_only
        steps: [{action: warn}]
exemptions:
  - {team: ml-infra, reason: platform team}
`

// TestFactsOnRealPods: real pods on the real API server (a bare
// pod, a Job's pod and a Deployment's, made by the controller-manager, with
// labels and annotations, in namespaces with labels) get their tier, team
// and exemption from what the API server reports, and a pod that is gone
// has its facts missing, never a tier.
func TestFactsOnRealPods(t *testing.T) {
	t.Parallel()
	cs := testkube.Admin(t)
	ctx := context.Background()
	prod := testkube.Namespace(t, cs, map[string]string{"gpuwatch.io/env": "prod"})
	research := testkube.Namespace(t, cs, map[string]string{"gpuwatch.io/env": "research"})

	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: prod,
		Labels: map[string]string{"team": "vision"}}})
	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb-alice", Namespace: research,
		Labels:      map[string]string{"app.kubernetes.io/name": "jupyterhub", "team": "nlp"},
		Annotations: map[string]string{schema.ExemptKey: "false"}}})
	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "nb-bob", Namespace: research,
		Labels:      map[string]string{"app.kubernetes.io/name": "jupyterhub", "team": "nlp"},
		Annotations: map[string]string{schema.ExemptKey: "demo on Friday"}}})
	testkube.RunningPod(t, cs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: research}})

	node := testkube.Nodes(t)[0]
	gpu := corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resourceOne}}
	one := int32(1)
	// A Job's pod, created by the job controller.
	job, err := cs.BatchV1().Jobs(research).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "sweep"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"team": "vision"}},
			Spec: corev1.PodSpec{NodeName: node, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/sweep:1", Resources: gpu}}}}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A Deployment's pod, through its ReplicaSet, in a team that is exempt.
	labels := map[string]string{"app": "embed", "team": "ml-infra"}
	if _, err := cs.AppsV1().Deployments(prod).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "embed"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/embed:1", Resources: gpu}}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	jobPod := ownedPod(t, research, "job-name="+job.Name)
	deployPod := ownedPod(t, prod, "app=embed")
	if err := cs.CoreV1().Pods(research).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 30*time.Second, "pod gone deleted", func() (bool, error) {
		_, err := cs.CoreV1().Pods(research).Get(ctx, "gone", metav1.GetOptions{})
		return err != nil, nil
	})

	tm, err := teams.Parse([]byte("team: {podLabel: team, default: unassigned}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := policy.Parse([]byte(realPolicy))
	if err != nil {
		t.Fatal(err)
	}
	// A small page size: the lists really page (the continue token).
	r := &facts.Resolver{Teams: tm, Sources: map[string]facts.Source{
		schema.SchedulerKubernetes: &kube.Facts{Core: cs.CoreV1(), PageSize: 2}}}
	now := time.Now()
	want := []struct {
		ns, pod, tier, team, owner, exempt, missing string
	}{
		{ns: prod, pod: "train", tier: "production", team: "vision"},
		{ns: research, pod: "nb-alice", tier: "notebooks", team: "nlp"},
		{ns: research, pod: "nb-bob", tier: "notebooks", team: "nlp", exempt: schema.ExemptKey + "=demo on Friday"},
		{ns: research, pod: jobPod, tier: "batch", team: "vision", owner: "Job"},
		{ns: prod, pod: deployPod, tier: "production", team: "ml-infra", owner: "ReplicaSet", exempt: "exemption: platform team"},
		{ns: research, pod: "gone", missing: "does not know job " + research + "/gone (gone)"},
	}
	fs := make([]finding.Finding, len(want))
	for i, w := range want {
		fs[i] = finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, Namespace: w.ns, Pod: w.pod,
			Job: w.ns + "/" + w.pod, Start: now.Add(-2 * time.Hour), End: now, WastedGPUHours: 2}
	}
	got := r.Resolve(ctx, fs)
	for i, w := range want {
		ev := pol.Evaluate(&fs[i], got[i], now)
		tier := ""
		if ev.Tier != nil {
			tier = ev.Tier.Name
		}
		team, _, _ := got[i].Value(schema.AttrTeam)
		owner, _, _ := got[i].Value(schema.AttrOwner)
		if tier != w.tier || ev.ExemptReason != w.exempt || ev.Exempt != (w.exempt != "") {
			t.Errorf("%s/%s: tier %q exempt %v (%q), want tier %q exempt %q (why %q)", w.ns, w.pod, tier, ev.Exempt, ev.ExemptReason, w.tier, w.exempt, ev.Why)
		}
		if w.missing != "" {
			if !strings.Contains(ev.Missing, w.missing) {
				t.Errorf("%s/%s: missing %q, want it to name %q", w.ns, w.pod, ev.Missing, w.missing)
			}
			continue
		}
		if ev.Missing != "" || team != w.team || owner != w.owner || got[i].State != "Running" {
			t.Errorf("%s/%s: missing %q team %q owner %q state %q, want team %q owner %q Running", w.ns, w.pod, ev.Missing, team, owner, got[i].State, w.team, w.owner)
		}
		if nl, _, _ := got[i].Map(schema.AttrNamespaceLabels); nl["kubernetes.io/metadata.name"] != w.ns {
			t.Errorf("%s/%s: namespace labels %v lack the API server's kubernetes.io/metadata.name", w.ns, w.pod, nl)
		}
		if got[i].Start.IsZero() {
			t.Errorf("%s/%s: no start time", w.ns, w.pod)
		}
	}
}

var resourceOne = resource.MustParse("1")

// ownedPod waits for the one Running pod a controller made for selector.
func ownedPod(t *testing.T, ns, selector string) string {
	t.Helper()
	cs := testkube.Admin(t)
	var name string
	testtool.Eventually(t, 60*time.Second, "a Running pod for "+selector, func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning && len(p.OwnerReferences) > 0 {
				name = p.Name
				return true, nil
			}
		}
		return false, nil
	})
	return name
}
