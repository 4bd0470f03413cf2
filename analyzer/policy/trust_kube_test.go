package policy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// The policies: tiers by team (a protective one for ml-infra, a reclaiming
// one for research, a reclaiming catch-all), and a protective tier a pod
// selects with its own label, which loads only where that label is trusted.
const (
	head      = "dry_run: false\ntiers:\n"
	teamTiers = `  - name: protected
    match: {teams: [ml-infra]}
    rules: [{pattern: cpu_only, steps: [{action: warn}]}]
  - name: research
    match: {teams: [research]}
    reclaim: true
    rules: [{pattern: cpu_only, steps: [{action: warn}, {action: reclaim, after: 1h}]}]
  - name: everyone-else
    reclaim: true
    rules: [{pattern: cpu_only, steps: [{action: warn}, {action: reclaim, after: 1h}]}]
`
	byLabelTier = `  - name: by-label
    match: {labels: {tier: production}}
    rules: [{pattern: cpu_only, steps: [{action: warn}]}]
`
	trustAll = "trust_workload_keys: {labels: [tier, gpuwatch.io/exempt], annotations: [gpuwatch.io/exempt]}\n"
)

// TestSelfServingPodOnRealAPI: a user who may create pods in two namespaces
// (a ServiceAccount bound to a Role, acting with its own token) labels and
// annotates their pod gpuwatch.io/exempt, labels it with a protected team
// and a protective tier. On the real API server's facts, the pod is not
// exempt and gets its namespace's team's tier unless the operator trusted
// those keys; with trust, each is honoured; and a policy whose tier matches
// the untrusted label is refused.
func TestSelfServingPodOnRealAPI(t *testing.T) {
	admin := testkube.Admin(t)
	ctx := context.Background()
	mapped := testkube.Namespace(t, admin, nil)
	unmapped := testkube.Namespace(t, admin, nil)
	user := podCreator(t, admin, mapped, unmapped)
	self := map[string]string{"team": "ml-infra", "tier": "production", schema.ExemptKey: "true"}
	for _, ns := range []string{mapped, unmapped} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "self-serving", Labels: self,
			Annotations: map[string]string{schema.ExemptKey: "true"}},
			Spec: corev1.PodSpec{NodeName: testkube.Nodes(t)[0], Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/train:1"}}}}
		// The Role may take a moment to reach the authorizer's cache.
		testtool.Eventually(t, 30*time.Second, "the pod's author creates "+ns+"/self-serving", func() (bool, error) {
			_, err := user.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) {
				return false, nil
			}
			return err == nil, err
		})
		testkube.WaitRunning(t, admin, ns, "self-serving")
	}
	testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: mapped}})

	if _, err := policy.Parse([]byte(head + byLabelTier + teamTiers)); err == nil {
		t.Fatal("a tier chosen by an untrusted pod label loaded")
	}
	untrusted := mustPolicy(t, head+teamTiers)
	trusted := mustPolicy(t, trustAll+head+byLabelTier+teamTiers)
	mapping := fmt.Sprintf("team:\n  namespaces: {%s: research}\n  default: unassigned\n", mapped)
	noLabel := mustTeams(t, mapping)
	withLabel := mustTeams(t, mapping+"  pod_label: team\n")

	now := time.Now()
	for _, c := range []struct {
		name            string
		pol             *policy.Policy
		tm              *teams.Config
		ns, pod         string
		tier, team, why string // why: the exemption's reason, "" for none
	}{
		{"mapped namespace, nothing trusted", untrusted, noLabel, mapped, "self-serving", "research", "research", ""},
		{"mapped namespace outranks the trusted team label", untrusted, withLabel, mapped, "self-serving", "research", "research", ""},
		{"unmapped namespace, nothing trusted", untrusted, noLabel, unmapped, "self-serving", "everyone-else", "unassigned", ""},
		{"unmapped namespace, team label trusted", untrusted, withLabel, unmapped, "self-serving", "protected", "ml-infra", ""},
		{"tier label and exemption trusted", trusted, withLabel, unmapped, "self-serving", "by-label", "ml-infra", schema.ExemptKey + "=true"},
		{"trusted, in the mapped namespace", trusted, noLabel, mapped, "self-serving", "by-label", "research", schema.ExemptKey + "=true"},
		{"trusted, a pod that claims nothing", trusted, withLabel, mapped, "plain", "research", "research", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &facts.Resolver{Teams: c.tm, Sources: map[string]facts.Source{schema.SchedulerKubernetes: &kube.Facts{Core: admin.CoreV1()}}}
			f := finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, Namespace: c.ns, Pod: c.pod,
				Job: c.ns + "/" + c.pod, Start: now.Add(-2 * time.Hour), End: now, WastedGPUHours: 2}
			fa := r.Resolve(ctx, []finding.Finding{f})[0]
			ev := c.pol.Evaluate(&f, fa, now)
			team, _, _ := fa.Value(schema.AttrTeam)
			tier := ""
			if ev.Tier != nil {
				tier = ev.Tier.Name
			}
			if ev.Missing != "" || tier != c.tier || team != c.team || ev.Exempt != (c.why != "") || ev.ExemptReason != c.why {
				t.Errorf("tier %q team %q exempt %v (%q) missing %q; want tier %q team %q exemption %q",
					tier, team, ev.Exempt, ev.ExemptReason, ev.Missing, c.tier, c.team, c.why)
			}
		})
	}
}

// podCreator is a user who may create pods in the namespaces and nothing
// else: a ServiceAccount bound to a Role in each, acting with a token of its
// own.
func podCreator(t *testing.T, admin kubernetes.Interface, namespaces ...string) kubernetes.Interface {
	t.Helper()
	ctx := context.Background()
	home, name := namespaces[0], "pod-author"
	if _, err := admin.CoreV1().ServiceAccounts(home).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get"}}}}
		if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: home}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}}
		if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return testkube.Client(t, testkube.ServiceAccountConfig(t, testkube.Config(t), home, name))
}

func mustPolicy(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustTeams(t *testing.T, doc string) *teams.Config {
	t.Helper()
	c, err := teams.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
