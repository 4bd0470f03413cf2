package manifests

import (
	"io/fs"
	"os"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// kubeTree is deploy/kubernetes, the tree under test.
var kubeTree = os.DirFS("../kubernetes")

var overlays = []string{"overlays/slurm-free-k8s", "overlays/production"}

// TestEveryManifestDecodes decodes every YAML file under deploy/kubernetes
// (resources and patches) strictly with client-go's scheme; custom resources
// must at least be well-formed Prometheus Operator monitors.
func TestEveryManifestDecodes(t *testing.T) {
	n := 0
	err := fs.WalkDir(kubeTree, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" || path.Base(p) == "kustomization.yaml" {
			return err
		}
		data, err := fs.ReadFile(kubeTree, p)
		if err != nil {
			return err
		}
		objs, err := Decode(p, data)
		if err != nil {
			t.Errorf("%v", err)
			return nil
		}
		for _, o := range objs {
			n++
			if o.Typed == nil && o.GVK.Group != "monitoring.coreos.com" {
				t.Errorf("%s: %s is neither a built-in kind nor a Prometheus Operator monitor", p, o.GVK)
			}
			if o.Name() == "" {
				t.Errorf("%s: %s has no metadata.name", p, o.GVK.Kind)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 15 {
		t.Fatalf("decoded only %d objects; is deploy/kubernetes in place?", n)
	}
}

func TestDecodeIsStrict(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"misspelt field", "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      hostPid: true\n", "hostPid"},
		{"duplicate field", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: None\n  clusterIP: None\n", "clusterIP"},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", "apiVersion and kind"},
		{"wrong type", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports: 3\n", "ports"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode("x.yaml", []byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
}

func renderDir(t *testing.T, dir string) []Object {
	t.Helper()
	objs, err := Render(path.Join("../kubernetes", dir))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(t *testing.T, objs []Object, kind, name string) Object {
	t.Helper()
	for _, o := range objs {
		if o.GVK.Kind == kind && o.Name() == name {
			return o
		}
	}
	t.Fatalf("no %s %s in the rendering", kind, name)
	return Object{}
}

// rendering is what one kustomization or one Helm values file produced, and
// what it should hold.
type rendering struct {
	objs                         []Object
	namespace                    string
	exporterImage, analyzerImage string
	// labels every object carries
	labels map[string]string
	// labels every monitor carries, for the operator's Prometheus to select it
	monitorLabels    map[string]string
	exporterPriority string
	prometheusURL    string
	// Secrets the operator creates (not rendered): name -> keys.
	externalSecrets map[string][]string
	// The kubelet's pod-resources socket is mounted.
	podResources bool
	// The exporter simulates a node (--source=sim): any node will do.
	sim bool
	// The namespace Grafana's sidecar watches, when not the release's.
	dashboardNamespace string
}

// checkRendering runs the checks every rendering must pass.
func checkRendering(t *testing.T, r rendering) {
	t.Helper()
	for _, o := range r.objs {
		ns := r.namespace
		if _, ok := Nested[map[string]any](o.Fields, "metadata", "labels")["grafana_dashboard"]; ok && r.dashboardNamespace != "" {
			ns = r.dashboardNamespace
		}
		if !clusterScoped[o.GVK.Kind] && o.Namespace() != ns {
			t.Errorf("%s in namespace %q, want %q", o.ID(), o.Namespace(), ns)
		}
		lbls := Nested[map[string]any](o.Fields, "metadata", "labels")
		for k, v := range r.labels {
			if lbls[k] != v {
				t.Errorf("%s: label %s=%v, want %s", o.ID(), k, lbls[k], v)
			}
		}
	}
	for _, o := range r.objs {
		switch w := o.Typed.(type) {
		case *appsv1.DaemonSet:
			checkExporter(t, r, w)
		case *appsv1.Deployment:
			checkAnalyzer(t, r, w)
		}
	}
	checkBindings(t, r.objs)
	checkServicesAndMonitors(t, r.objs, r.monitorLabels)
	// The analyzer's page shows every user's findings and the audit log:
	// loopback only, or behind the web config's authentication.
	for _, e := range analyzerExposure(t, r) {
		t.Error(e)
	}
}

// clusterScoped lists the cluster-scoped kinds our manifests contain.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true}

// TestOverlays renders each overlay and checks the objects an operator relies on.
func TestOverlays(t *testing.T) {
	// The Secrets the production operator creates: the SMTP password and the
	// web config with a hash of their own password.
	smtp := map[string][]string{"gpuwatch-smtp": smtpSecretKeys(t), "gpuwatch-web-config": {"web-config.yml"}}
	cases := []struct {
		dir string
		r   rendering
	}{
		{"base", rendering{namespace: "gpuwatch",
			exporterImage: "ghcr.io/gpuwatch/gpuwatch-exporter:latest", analyzerImage: "ghcr.io/gpuwatch/gpuwatch-analyzer:latest",
			prometheusURL: "http://prometheus-operated.monitoring.svc:9090", podResources: true}},
		{"overlays/slurm-free-k8s", rendering{namespace: "gpuwatch",
			exporterImage: "ghcr.io/gpuwatch/gpuwatch-exporter:v0.1.0", analyzerImage: "ghcr.io/gpuwatch/gpuwatch-analyzer:v0.1.0",
			prometheusURL: "http://prometheus-operated.monitoring.svc:9090", podResources: true}},
		{"overlays/production", rendering{namespace: "gpuwatch-system",
			exporterImage: "registry.example.com/gpuwatch/gpuwatch-exporter:v0.1.0", analyzerImage: "registry.example.com/gpuwatch/gpuwatch-analyzer:v0.1.0",
			labels: map[string]string{"environment": "production"}, monitorLabels: map[string]string{"release": "kube-prometheus-stack"},
			exporterPriority: "system-node-critical", prometheusURL: "http://thanos-query.monitoring.svc:9090", externalSecrets: smtp,
			podResources: true}},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			r := c.r
			r.objs = renderDir(t, c.dir)
			if r.labels == nil {
				r.labels = map[string]string{}
			}
			r.labels["app.kubernetes.io/part-of"] = "gpuwatch"
			checkRendering(t, r)
			kinds := map[string]int{}
			for _, o := range r.objs {
				kinds[o.GVK.Kind]++
				if o.GVK.Kind == "Namespace" && o.Name() != r.namespace {
					t.Errorf("namespace object %s, want %s", o.Name(), r.namespace)
				}
			}
			wantKinds := map[string]int{"Namespace": 1, "ServiceAccount": 2, "DaemonSet": 1, "Deployment": 1, "Service": 2,
				"ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "ConfigMap": 2, "PersistentVolumeClaim": 1,
				"PodMonitor": 1}
			// Only the production overlay serves the analyzer beyond
			// loopback (behind basic auth), so only it scrapes it.
			if c.dir == "overlays/production" {
				wantKinds["ServiceMonitor"] = 1
			}
			if !reflect.DeepEqual(kinds, wantKinds) {
				t.Errorf("kinds %v, want %v", kinds, wantKinds)
			}
		})
	}
}

func checkExporter(t *testing.T, r rendering, ds *appsv1.DaemonSet) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	if !ps.HostPID {
		t.Error("exporter: hostPID must be true for process attribution")
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("exporter: must not mount an API token (it never talks to the API server)")
	}
	if contains(ps.Containers[0].Args, "--source=sim") != r.sim {
		t.Errorf("exporter: --source=sim in %v, want %v", ps.Containers[0].Args, r.sim)
	}
	if ps.NodeSelector["nvidia.com/gpu.present"] != "true" && !r.sim {
		t.Errorf("exporter: node selector %v, want nvidia.com/gpu.present=true", ps.NodeSelector)
	}
	tolerated := false
	for _, tol := range ps.Tolerations {
		tolerated = tolerated || (tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists)
	}
	if !tolerated {
		t.Error("exporter: no toleration for the nvidia.com/gpu taint")
	}
	if ps.PriorityClassName != r.exporterPriority {
		t.Errorf("exporter: priority class %q, want %q", ps.PriorityClassName, r.exporterPriority)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("exporter: %d containers, want 1", len(ps.Containers))
	}
	ctr := ps.Containers[0]
	if ctr.Image != r.exporterImage {
		t.Errorf("exporter image %s, want %s", ctr.Image, r.exporterImage)
	}
	parseExporterArgs(t, ctr.Args)
	nodeName := false
	for _, e := range ctr.Env {
		nodeName = nodeName || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !nodeName {
		t.Error("exporter: NODE_NAME must come from the downward API (spec.nodeName)")
	}
	checkProbes(t, "exporter", &ctr, "/healthz", "metrics")
	if len(ctr.Ports) != 1 || ctr.Ports[0].Name != "metrics" || ctr.Ports[0].ContainerPort != 9400 {
		t.Errorf("exporter ports %+v, want metrics:9400", ctr.Ports)
	}
	if _, ok := ctr.Resources.Requests[corev1.ResourceName("nvidia.com/gpu")]; ok {
		t.Error("exporter must not request a GPU: it would take one away from the jobs")
	}
	if ctr.Resources.Limits.Memory().IsZero() || ctr.Resources.Limits.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() {
		t.Error("exporter: CPU and memory requests and limits are required")
	}
	checkTight(t, "exporter", ctr.SecurityContext)
	checkArgFiles(t, r, &ps, &ctr)
	socket := false
	for _, m := range ctr.VolumeMounts {
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/var/lib/kubelet/pod-resources" && m.ReadOnly &&
				m.MountPath == "/var/lib/kubelet/pod-resources" {
				socket = true
			}
		}
	}
	if socket != r.podResources {
		t.Errorf("exporter: pod-resources directory mounted read-only from the host: %v, want %v", socket, r.podResources)
	}
	if contains(ctr.Args, "--kubernetes.enable") && !socket {
		t.Errorf("exporter: --kubernetes.enable without the pod-resources socket")
	}
}

// checkProbes: liveness and readiness on the health path, or a TCP check
// when a basic-auth web config would answer 401 to the kubelet.
func checkProbes(t *testing.T, who string, ctr *corev1.Container, healthPath, port string) {
	t.Helper()
	auth := false
	for _, a := range ctr.Args {
		auth = auth || strings.HasPrefix(a, "--web.config.file=")
		if strings.HasPrefix(a, "--web.listen-address=127.0.0.1:") {
			// Loopback only: the kubelet cannot reach it, so no probes.
			if ctr.LivenessProbe != nil || ctr.ReadinessProbe != nil {
				t.Errorf("%s: a probe on a loopback-only listener", who)
			}
			return
		}
	}
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		switch {
		case p == nil:
			t.Errorf("%s: a probe is missing", who)
		case p.HTTPGet != nil && p.HTTPGet.Path == healthPath && p.HTTPGet.Port.String() == port && p.TCPSocket == nil:
		case auth && p.TCPSocket != nil && p.TCPSocket.Port.String() == port && p.HTTPGet == nil:
		default:
			t.Errorf("%s: probe %+v, want GET %s on the %s port (or a TCP check behind auth)", who, p.ProbeHandler, healthPath, port)
		}
	}
}

func checkTight(t *testing.T, who string, sc *corev1.SecurityContext) {
	t.Helper()
	switch {
	case sc == nil:
		t.Fatalf("%s: no securityContext", who)
	case sc.Privileged != nil && *sc.Privileged:
		t.Errorf("%s: privileged", who)
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation must be false", who)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root filesystem must be read-only", who)
	case sc.Capabilities == nil || !reflect.DeepEqual(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
		t.Errorf("%s: capabilities %+v, want drop ALL and add none", who, sc.Capabilities)
	}
}

func checkAnalyzer(t *testing.T, r rendering, dep *appsv1.Deployment) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("analyzer: one replica with the Recreate strategy (one writer of the state)")
	}
	ps := dep.Spec.Template.Spec
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
		t.Error("analyzer must run as non-root")
	}
	ctr := ps.Containers[0]
	checkTight(t, "analyzer", ctr.SecurityContext)
	if ctr.Image != r.analyzerImage {
		t.Errorf("analyzer image %s, want %s", ctr.Image, r.analyzerImage)
	}
	if !contains(ctr.Args, "--prometheus.url="+r.prometheusURL) {
		t.Errorf("analyzer args %v, want --prometheus.url=%s", ctr.Args, r.prometheusURL)
	}
	checkAnalyzerArgs(t, dep.Name, ctr.Args, analyzerFlags(t))
	checkProbes(t, "analyzer", &ctr, "/metrics", "http")
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("analyzer: secret %s in the environment; mount it as a file", e.ValueFrom.SecretKeyRef.Name)
		}
	}
	inCluster := contains(ctr.Args, "--kubernetes.in-cluster")
	if inCluster && (ps.AutomountServiceAccountToken != nil && !*ps.AutomountServiceAccountToken) {
		t.Error("analyzer: --kubernetes.in-cluster without a service account token")
	}
	if inCluster {
		bound := false
		for _, o := range r.objs {
			if b, ok := o.Typed.(*rbacv1.ClusterRoleBinding); ok {
				for _, s := range b.Subjects {
					bound = bound || (s.Kind == "ServiceAccount" && s.Name == ps.ServiceAccountName)
				}
			}
		}
		if !bound {
			t.Errorf("analyzer: --kubernetes.in-cluster, but service account %q is bound to no role", ps.ServiceAccountName)
		}
	}
	checkArgFiles(t, r, &ps, &ctr)
}

// mountedFiles lists the files a container sees from its ConfigMap and
// Secret volumes, with their content (nil for Secrets the operator creates).
func mountedFiles(t *testing.T, r rendering, ps *corev1.PodSpec, ctr *corev1.Container) map[string][]byte {
	t.Helper()
	volumes := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		volumes[v.Name] = v
	}
	files := map[string][]byte{}
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("%s: mount %s names no volume", ctr.Name, m.Name)
			continue
		}
		switch {
		case v.ConfigMap != nil:
			cm := find(t, r.objs, "ConfigMap", v.ConfigMap.Name).Typed.(*corev1.ConfigMap)
			for k, d := range cm.Data {
				files[path.Join(m.MountPath, k)] = []byte(d)
			}
		case v.Secret != nil:
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
				t.Errorf("secret %s is readable by others", v.Secret.SecretName)
			}
			if keys, ok := r.externalSecrets[v.Secret.SecretName]; ok {
				for _, k := range keys {
					files[path.Join(m.MountPath, k)] = nil
				}
				continue
			}
			sec := find(t, r.objs, "Secret", v.Secret.SecretName).Typed.(*corev1.Secret)
			for k, d := range sec.StringData {
				files[path.Join(m.MountPath, k)] = []byte(d)
			}
			for k, d := range sec.Data {
				files[path.Join(m.MountPath, k)] = d
			}
		case v.PersistentVolumeClaim != nil:
			find(t, r.objs, "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName)
		}
	}
	return files
}

// checkArgFiles: every file a flag names under /etc is mounted from a
// ConfigMap or Secret (a renamed key would otherwise only fail on the
// cluster), and each configuration file is accepted by gpuwatch's own parser.
func checkArgFiles(t *testing.T, r rendering, ps *corev1.PodSpec, ctr *corev1.Container) {
	t.Helper()
	files := mountedFiles(t, r, ps, ctr)
	for _, a := range ctr.Args {
		name, val, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(val, "/etc/") {
			continue
		}
		content, ok := files[val]
		if !ok {
			t.Errorf("%s: %s names %s, which no mounted ConfigMap or Secret provides", ctr.Name, name, val)
			continue
		}
		checkConfigFile(t, r, ps, ctr, files, strings.TrimPrefix(name, "--"), val, content)
	}
}

// checkBindings: each binding's ServiceAccount subject exists in the
// rendering, in the namespace the binding names (a renamed namespace must
// carry the binding with it), and its role exists.
func checkBindings(t *testing.T, objs []Object) {
	t.Helper()
	for _, o := range objs {
		b, ok := o.Typed.(*rbacv1.ClusterRoleBinding)
		if !ok {
			continue
		}
		find(t, objs, b.RoleRef.Kind, b.RoleRef.Name)
		for _, s := range b.Subjects {
			sa := find(t, objs, "ServiceAccount", s.Name)
			if sa.Namespace() != s.Namespace {
				t.Errorf("binding %s: subject %s/%s, but the ServiceAccount is in %s", b.Name, s.Namespace, s.Name, sa.Namespace())
			}
		}
	}
}

// checkServicesAndMonitors: each Service and monitor selects exactly its own
// workload on a named port, and each monitor names the job after the
// component ("gpuwatch-exporter", "gpuwatch-analyzer", whatever the objects
// are called) through jobLabel, not the Operator's "<namespace>/<monitor>".
func checkServicesAndMonitors(t *testing.T, objs []Object, monitorLabels map[string]string) {
	t.Helper()
	podLabels := map[string]labels.Set{}
	portNames := map[string]map[string]bool{}
	for _, o := range objs {
		var tpl *corev1.PodTemplateSpec
		switch w := o.Typed.(type) {
		case *appsv1.DaemonSet:
			tpl = &w.Spec.Template
		case *appsv1.Deployment:
			tpl = &w.Spec.Template
		default:
			continue
		}
		podLabels[o.Name()] = tpl.Labels
		portNames[o.Name()] = map[string]bool{}
		for _, c := range tpl.Spec.Containers {
			for _, p := range c.Ports {
				portNames[o.Name()][p.Name] = true
			}
		}
	}
	selects := func(sel map[string]string) []string {
		var out []string
		for w, l := range podLabels {
			if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(l) {
				out = append(out, w)
			}
		}
		sort.Strings(out)
		return out
	}
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		if o.GVK.Kind != "Service" {
			continue
		}
		svc := o.Typed.(*corev1.Service)
		ws := selects(svc.Spec.Selector)
		if len(ws) != 1 {
			t.Errorf("service %s selects %v, want exactly one workload", svc.Name, ws)
			continue
		}
		services[ws[0]] = svc
		for _, p := range svc.Spec.Ports {
			if !portNames[ws[0]][p.TargetPort.String()] {
				t.Errorf("service %s: target port %s is not a named container port", svc.Name, p.TargetPort.String())
			}
		}
	}
	for _, o := range objs {
		if o.GVK.Kind != "PodMonitor" && o.GVK.Kind != "ServiceMonitor" {
			continue
		}
		if o.GVK.Version != "v1" {
			t.Errorf("%s: apiVersion %s, want monitoring.coreos.com/v1", o.ID(), o.GVK.GroupVersion())
		}
		sel := map[string]string{}
		for k, v := range Nested[map[string]any](o.Fields, "spec", "selector", "matchLabels") {
			sel[k], _ = v.(string)
		}
		key, target := "podMetricsEndpoints", labels.Set(nil)
		ws := selects(sel)
		if len(ws) != 1 {
			t.Errorf("%s selects %v, want one workload", o.ID(), ws)
			continue
		}
		target = podLabels[ws[0]]
		if o.GVK.Kind == "ServiceMonitor" {
			key = "endpoints"
			svc := services[ws[0]]
			if svc == nil || !labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
				t.Errorf("%s selects no Service of %s", o.ID(), ws[0])
				continue
			}
			target = svc.Labels
		}
		jobLabel := Nested[string](o.Fields, "spec", "jobLabel")
		want := "gpuwatch-" + target["app.kubernetes.io/component"]
		if job := target[jobLabel]; jobLabel == "" || job != want {
			t.Errorf("%s: jobLabel %q gives the job %q, want %q", o.ID(), jobLabel, job, want)
		}
		eps := Nested[[]any](o.Fields, "spec", key)
		if len(eps) == 0 {
			t.Errorf("%s: no spec.%s", o.ID(), key)
		}
		for _, e := range eps {
			port, _ := e.(map[string]any)["port"].(string)
			if !portNames[ws[0]][port] {
				t.Errorf("%s: endpoint port %q is not a port of %s", o.ID(), port, ws[0])
			}
		}
		for k, v := range monitorLabels {
			if got := Nested[string](o.Fields, "metadata", "labels", k); got != v {
				t.Errorf("%s: label %s=%q, want %q", o.ID(), k, got, v)
			}
		}
	}
}

// smtpSecretKeys reads the keys of deploy/kubernetes/smtp-secret.example.yaml,
// which stands for the Secret the operator creates.
func smtpSecretKeys(t *testing.T) []string {
	t.Helper()
	data, err := fs.ReadFile(kubeTree, "smtp-secret.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode("smtp-secret.example.yaml", data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("smtp-secret.example.yaml: %v", err)
	}
	sec, ok := objs[0].Typed.(*corev1.Secret)
	if !ok || sec.Name != "gpuwatch-smtp" {
		t.Fatalf("smtp-secret.example.yaml holds %s %s", objs[0].GVK.Kind, objs[0].Name())
	}
	var keys []string
	for k := range sec.StringData {
		keys = append(keys, k)
	}
	return keys
}

// TestSecretsAreNotRendered: kustomize must not own a Secret, or every apply
// would put the placeholder back over the operator's real password.
func TestSecretsAreNotRendered(t *testing.T) {
	for _, dir := range append([]string{"base"}, overlays...) {
		for _, o := range renderDir(t, dir) {
			if o.GVK.Kind == "Secret" {
				t.Errorf("%s renders %s", dir, o.ID())
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func BenchmarkRenderProduction(b *testing.B) {
	for b.Loop() {
		if _, err := Render("../kubernetes/overlays/production"); err != nil {
			b.Fatal(err)
		}
	}
}
