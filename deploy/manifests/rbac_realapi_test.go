package manifests

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// call is one request to the API server as RBAC sees it, and its answer.
type call struct {
	rule   string // "group resource[/subresource] verb", as expand writes rules
	path   string
	status int
}

// recorder is a transport that notes every request and its status code.
type recorder struct {
	mu    sync.Mutex
	calls []call
	next  http.RoundTripper
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	c := call{rule: ruleOf(req), path: req.Method + " " + req.URL.Path}
	if resp != nil {
		c.status = resp.StatusCode
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return resp, err
}

// ruleOf names the RBAC rule a request needs, as the API server's request
// info resolves it: /api/v1 or /apis/GROUP/VERSION, then optionally
// namespaces/NS, then RESOURCE[/NAME[/SUBRESOURCE]]; the verb from the
// method and whether a name is given.
func ruleOf(req *http.Request) string {
	seg := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	group := ""
	switch {
	case len(seg) >= 2 && seg[0] == "api":
		seg = seg[2:]
	case len(seg) >= 3 && seg[0] == "apis":
		group, seg = seg[1], seg[3:]
	default:
		return "nonresource " + req.URL.Path
	}
	if len(seg) > 2 && seg[0] == "namespaces" {
		seg = seg[2:]
	}
	if len(seg) == 0 {
		return "discovery " + req.URL.Path
	}
	res, named := seg[0], len(seg) > 1
	if len(seg) > 2 {
		res += "/" + seg[2]
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch"}[req.Method]
	switch req.Method {
	case http.MethodGet:
		verb = "list"
		if named {
			verb = "get"
		} else if req.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
	case http.MethodDelete:
		verb = "deletecollection"
		if named {
			verb = "delete"
		}
	}
	return group + " " + res + " " + verb
}

// TestRBACOnRealAPIServer: the chart's RBAC (rendered with its defaults and
// applied to the real API server) lets the analyzer's ServiceAccount, with a
// token the API server issued, make every call the analyzer makes: the
// facts' lists, each reclaim mode of the actuator (an eviction that goes
// through, one a disruption budget refuses, the delete after refusals, the
// delete mode, the scale of a Deployment and of a StatefulSet) and leader
// election; with the policy's out_of_service enabled, the cordon of a node
// too. No call is forbidden, and no rule of the chart goes unused.
func TestRBACOnRealAPIServer(t *testing.T) {
	t.Run("defaults", func(t *testing.T) { realRBAC(t, map[string]any{}, false) })
	t.Run("out_of_service enabled", func(t *testing.T) {
		realRBAC(t, map[string]any{"analyzer": map[string]any{"policy": map[string]any{"out_of_service": map[string]any{"enabled": true}}}}, true)
	})
}

func realRBAC(t *testing.T, vals map[string]any, cordon bool) {
	adminCfg := testkube.Config(t)
	admin := testkube.Client(t, adminCfg)
	ctx := context.Background()
	ns := testkube.Namespace(t, admin, nil)
	release := "gw" + ns[strings.LastIndex(ns, "-"):] // cluster-scoped names differ per run
	objs := helmTemplate(t, release, ns, vals)

	var sa string
	var granted []string
	for _, o := range objs {
		var err error
		switch r := o.Typed.(type) {
		case *corev1.ServiceAccount:
			if strings.HasSuffix(r.Name, "-analyzer") {
				sa = r.Name
			}
			_, err = admin.CoreV1().ServiceAccounts(ns).Create(ctx, r, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			granted = append(granted, expand(t, r.Rules)...)
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, r, metav1.CreateOptions{})
			t.Cleanup(func() { _ = admin.RbacV1().ClusterRoles().Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, r, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), r.Name, metav1.DeleteOptions{})
			})
		case *rbacv1.Role:
			granted = append(granted, expand(t, r.Rules)...)
			_, err = admin.RbacV1().Roles(ns).Create(ctx, r, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, r, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("apply %s: %v", o.ID(), err)
		}
	}
	if sa == "" || len(granted) == 0 {
		t.Fatalf("the chart's defaults render no analyzer ServiceAccount (%q) or no rules (%v)", sa, granted)
	}

	// The workload, made by the admin: pods the analyzer will reclaim.
	work := testkube.Namespace(t, admin, nil)
	node := testkube.Nodes(t)[0]
	for _, p := range []string{"evict-me", "refused", "delete-me"} {
		testkube.RunningPod(t, admin, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p, Namespace: work, Labels: map[string]string{"app": p}}})
	}
	one := intstr.FromInt32(1)
	if _, err := admin.PolicyV1().PodDisruptionBudgets(work).Create(ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "refused"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "refused"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 60*time.Second, "the PDB's status", func() (bool, error) {
		p, err := admin.PolicyV1().PodDisruptionBudgets(work).Get(ctx, "refused", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 1, err
	})
	replicas := int32(1)
	tmpl := func(app string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "gpuwatch.invalid/" + app + ":1"}}}}
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	if _, err := admin.AppsV1().Deployments(work).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: sel("web"), Template: tmpl("web")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AppsV1().StatefulSets(work).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{Replicas: &replicas, ServiceName: "db", Selector: sel("db"), Template: tmpl("db")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A Job's pod: the facts walk a pod's owners to its kind (Pod -> Job).
	train := tmpl("train")
	train.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := admin.BatchV1().Jobs(work).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "train"},
		Spec: batchv1.JobSpec{Template: train}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webPod, trainPod := "", ""
	testtool.Eventually(t, 60*time.Second, "the Deployment's, StatefulSet's and Job's pods", func() (bool, error) {
		l, err := admin.CoreV1().Pods(work).List(ctx, metav1.ListOptions{LabelSelector: "app in (web,db,train)"})
		if err != nil {
			return false, err
		}
		n := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
				switch p.Labels["app"] {
				case "web":
					webPod = p.Name
				case "train":
					trainPod = p.Name
				}
			}
		}
		return n == 3, nil
	})

	// The analyzer: the chart's ServiceAccount, a real token, no certificate.
	saCfg := testkube.ServiceAccountConfig(t, adminCfg, ns, sa)
	// RBAC's caches take a moment to see new bindings: wait until one
	// granted call passes before recording.
	probe := testkube.Client(t, saCfg)
	testtool.Eventually(t, 30*time.Second, "the bindings in effect", func() (bool, error) {
		_, err := probe.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	})
	rec := &recorder{}
	saCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	cs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	analyzerCalls(t, cs, ns, work, webPod, trainPod)
	if cordon {
		// A node of its own (kwok leaves it alone), so no other test's
		// node is cordoned.
		node := "cordon-" + release
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
		c := &kube.Cordon{Core: cs.CoreV1()}
		req := &action.Request{Step: action.StepDrain, Finding: finding.Finding{Pattern: schema.GPUFault, Hostname: node, Job: work + "/evict-me"}}
		// A new node is annotated by the controller-manager's TTL and
		// node-lifecycle controllers at once: a cordon between its read and
		// its patch is refused as a conflict, to retry, as the next cycle would.
		detail, err := c.Act(ctx, req)
		for i := 0; i < 20 && errors.Is(err, action.ErrRetryLater); i++ {
			time.Sleep(200 * time.Millisecond)
			detail, err = c.Act(ctx, req)
		}
		if err != nil || !strings.HasPrefix(detail, "cordoned node "+node) {
			t.Fatalf("cordon as the ServiceAccount: %q %v", detail, err)
		}
		if out, _, err := c.Reconcile(ctx, req); err != nil || out != action.Applied {
			t.Fatalf("reconcile the cordon: %v %v", out, err)
		}
	}

	rec.mu.Lock()
	defer rec.mu.Unlock()
	used := map[string]bool{}
	for _, c := range rec.calls {
		if c.status == http.StatusForbidden || c.status == http.StatusUnauthorized {
			t.Errorf("%d for %s (%s) as %s/%s", c.status, c.path, c.rule, ns, sa)
		}
		used[c.rule] = true
	}
	for _, g := range granted {
		if !used[g] {
			t.Errorf("the chart grants %q, which no call of the analyzer used", g)
		}
	}
	// The recorder sees a refusal: the namespace's default ServiceAccount,
	// bound to nothing, may not list namespaces.
	none := &recorder{}
	noneCfg := testkube.ServiceAccountConfig(t, adminCfg, ns, "default")
	noneCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { none.next = rt; return none })
	if _, err := testkube.Client(t, noneCfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) ||
		len(none.calls) != 1 || none.calls[0].status != http.StatusForbidden || none.calls[0].rule != " namespaces list" {
		t.Errorf("an unbound ServiceAccount listing namespaces: %v, recorded %+v; want one 403 for \" namespaces list\"", err, none.calls)
	}
	var all []string
	for u := range used {
		all = append(all, u)
	}
	sort.Strings(all)
	t.Logf("%d calls as %s/%s, using %q", len(rec.calls), ns, sa, all)
}

// analyzerCalls makes, through cs, the calls the analyzer makes in a cluster.
func analyzerCalls(t *testing.T, cs *kubernetes.Clientset, leaseNS, work, webPod, trainPod string) {
	t.Helper()
	ctx := context.Background()
	src := &kube.Facts{Core: cs.CoreV1(), Apps: cs.AppsV1(), Batch: cs.BatchV1()}
	got, err := src.Lookup(ctx, []string{work + "/evict-me"})
	if err != nil || got[work+"/evict-me"] == nil {
		t.Fatalf("facts: %v %v", got, err)
	}
	// Each reclaim carries the proof the escalator makes from these facts:
	// the finding's telemetry is on the pod's node, since it was created.
	ids := []string{}
	for _, p := range []string{"evict-me", "refused", "delete-me", webPod, "db-0", trainPod} {
		ids = append(ids, work+"/"+p)
	}
	pods, err := src.Lookup(ctx, ids)
	if err != nil {
		t.Fatalf("facts: %v", err)
	}
	// The kinds come from the owners the ServiceAccount could read: a Job's
	// pod is batch whatever its name; a Deployment's or StatefulSet's is a
	// service unless a name rule says more.
	if fa := pods[work+"/"+trainPod]; fa == nil || fa.Alloc.Kind != "batch" || !strings.Contains(fa.KindSource, "Job") {
		t.Errorf("kind of the Job's pod %s: %+v; want batch from its owner", trainPod, fa)
	}
	for _, pod := range []string{webPod, "db-0"} {
		if fa := pods[work+"/"+pod]; fa == nil || fa.OwnerKind != "service" {
			t.Errorf("owner kind of %s: %+v; want service", pod, fa)
		}
	}
	req := func(pod string, attempt int) *action.Request {
		fa := pods[work+"/"+pod]
		if fa == nil || len(fa.Identity.Nodes) == 0 {
			t.Fatalf("facts of %s: %+v", pod, fa)
		}
		f := finding.Finding{Pattern: schema.CPUOnly, Namespace: work, Pod: pod, Job: work + "/" + pod, Scheduler: schema.SchedulerKubernetes,
			Hostname: fa.Identity.Nodes[0], Start: fa.Identity.Since.Add(time.Minute)}
		proof := target.Prove(&f, fa, "")
		if !proof.OK() {
			t.Fatalf("%s: %s", pod, proof.String())
		}
		return &action.Request{Step: action.StepReclaim, Attempt: attempt, Finding: f, Target: &proof}
	}
	k := func(mode string, deleteAfter int) *kube.Reclaim {
		return &kube.Reclaim{Core: cs.CoreV1(), Apps: cs.AppsV1(), Mode: mode, DeleteAfterRefusals: deleteAfter}
	}
	steps := []struct {
		k       *kube.Reclaim
		pod     string
		attempt int
		want    string
		err     error
	}{
		{k("evict", 0), "evict-me", 1, "evicted pod", nil},
		{k("evict", 1), "refused", 1, "", action.ErrRetryLater},
		{k("evict", 1), "refused", 2, "deleted after 1 refused evictions", nil},
		{k("delete", 0), "delete-me", 1, "deleted pod", nil},
		{k("scale_owner", 0), webPod, 1, "scaled deployment " + work + "/web from 1 to 0", nil},
		{k("scale_owner", 0), "db-0", 1, "scaled statefulset " + work + "/db from 1 to 0", nil},
	}
	for _, s := range steps {
		if _, _, err := s.k.Reconcile(ctx, req(s.pod, s.attempt)); err != nil {
			t.Fatalf("reconcile %s: %v", s.pod, err)
		}
		detail, err := s.k.Act(ctx, req(s.pod, s.attempt))
		if !errors.Is(err, s.err) || (s.err == nil && err != nil) || !strings.HasPrefix(detail, s.want) {
			t.Fatalf("%s %s attempt %d: %q, %v; want %q, %v", s.k.Mode, s.pod, s.attempt, detail, err, s.want, s.err)
		}
	}
	// The owners' replicas, as the crash-recovery reconcile reads them back.
	for _, s := range steps[4:] {
		if out, why, err := s.k.Reconcile(ctx, req(s.pod, 1)); err != nil || out != action.Applied {
			t.Fatalf("reconcile %s after the scale: %v %q %v", s.pod, out, why, err)
		}
	}

	kl, err := kube.NewLease(kube.LeaseOptions{Coordination: cs.CoordinationV1(), Namespace: leaseNS, Identity: "rbac-test",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond, ReleaseOnCancel: true})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); kl.Run(lctx) }()
	testtool.Eventually(t, 20*time.Second, "leading as the ServiceAccount", func() (bool, error) {
		return kl.Lead(ctx, time.Now())
	})
	time.Sleep(600 * time.Millisecond) // a renewal (update)
	cancel()
	<-done
}
