package manifests

import (
	"io/fs"
	"os"
	"os/exec"
	"path"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// kube is deploy/kubernetes, the tree under test.
var kube = os.DirFS("../kubernetes")

var overlays = []string{"overlays/slurm-free-k8s", "overlays/production"}

// TestEveryManifestDecodes decodes every YAML file under deploy/kubernetes
// (resources and patches) strictly with client-go's scheme; custom resources
// must at least be well-formed Prometheus Operator monitors.
func TestEveryManifestDecodes(t *testing.T) {
	n := 0
	err := fs.WalkDir(kube, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".yaml" || path.Base(p) == "kustomization.yaml" {
			return err
		}
		data, err := fs.ReadFile(kube, p)
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
	objs, err := Render(kube, dir)
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

// TestOverlays renders each overlay and checks the objects an operator relies on.
func TestOverlays(t *testing.T) {
	cases := []struct {
		dir, namespace, image string
		extraLabels           map[string]string
		monitorLabel          string
		exporterPriority      string
		prometheusURL         string
	}{
		{"base", "gpuwatch", "ghcr.io/gpuwatch/gpuwatch:latest", nil, "", "", "http://prometheus-operated.monitoring.svc:9090"},
		{"overlays/slurm-free-k8s", "gpuwatch", "ghcr.io/gpuwatch/gpuwatch:v0.1.0", nil, "", "", "http://prometheus-operated.monitoring.svc:9090"},
		{"overlays/production", "gpuwatch-system", "registry.example.com/gpuwatch/gpuwatch:v0.1.0",
			map[string]string{"environment": "production"}, "kube-prometheus-stack", "system-node-critical", "http://thanos-query.monitoring.svc:9090"},
	}
	for _, c := range cases {
		t.Run(c.dir, func(t *testing.T) {
			objs := renderDir(t, c.dir)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GVK.Kind]++
				if o.GVK.Kind == "Namespace" || clusterScoped[o.GVK.Kind] {
					if o.GVK.Kind == "Namespace" && o.Name() != c.namespace {
						t.Errorf("namespace object %s, want %s", o.Name(), c.namespace)
					}
				} else if o.Namespace() != c.namespace {
					t.Errorf("%s in namespace %q, want %q", o.ID(), o.Namespace(), c.namespace)
				}
				lbls := Nested[map[string]any](o.Fields, "metadata", "labels")
				want := map[string]string{"app.kubernetes.io/part-of": "gpuwatch"}
				for k, v := range c.extraLabels {
					want[k] = v
				}
				for k, v := range want {
					if lbls[k] != v {
						t.Errorf("%s: label %s=%v, want %s", o.ID(), k, lbls[k], v)
					}
				}
			}
			wantKinds := map[string]int{"Namespace": 1, "ServiceAccount": 2, "DaemonSet": 1, "Deployment": 1, "Service": 2,
				"ClusterRole": 1, "ClusterRoleBinding": 1, "ConfigMap": 2, "PersistentVolumeClaim": 1,
				"PodMonitor": 1, "ServiceMonitor": 1}
			if !reflect.DeepEqual(kinds, wantKinds) {
				t.Errorf("kinds %v, want %v", kinds, wantKinds)
			}

			ds := find(t, objs, "DaemonSet", "gpuwatch-exporter").Typed.(*appsv1.DaemonSet)
			checkExporter(t, objs, ds, c.image, c.exporterPriority)
			dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
			checkAnalyzer(t, objs, dep, c.image, c.prometheusURL)
			checkBindings(t, objs)
			checkServicesAndMonitors(t, objs, c.monitorLabel)
		})
	}
}

func checkExporter(t *testing.T, objs []Object, ds *appsv1.DaemonSet, image, priority string) {
	t.Helper()
	ps := ds.Spec.Template.Spec
	if !ps.HostPID {
		t.Error("exporter: hostPID must be true for process attribution")
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("exporter: must not mount an API token (it never talks to the API server)")
	}
	if ps.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("exporter: node selector %v, want nvidia.com/gpu.present=true", ps.NodeSelector)
	}
	tolerated := false
	for _, tol := range ps.Tolerations {
		tolerated = tolerated || (tol.Key == "nvidia.com/gpu" && tol.Operator == corev1.TolerationOpExists)
	}
	if !tolerated {
		t.Error("exporter: no toleration for the nvidia.com/gpu taint")
	}
	if ps.PriorityClassName != priority {
		t.Errorf("exporter: priority class %q, want %q", ps.PriorityClassName, priority)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("exporter: %d containers, want 1", len(ps.Containers))
	}
	ctr := ps.Containers[0]
	if ctr.Image != image {
		t.Errorf("exporter image %s, want %s", ctr.Image, image)
	}
	if len(ctr.Args) == 0 || ctr.Args[0] != "exporter" {
		t.Errorf("exporter args %v must start with the exporter subcommand", ctr.Args)
	}
	nodeName := false
	for _, e := range ctr.Env {
		nodeName = nodeName || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !nodeName {
		t.Error("exporter: NODE_NAME must come from the downward API (spec.nodeName)")
	}
	for _, p := range []*corev1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "metrics" {
			t.Errorf("exporter: probe %+v, want GET /healthz on the metrics port", p)
		}
	}
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
	checkArgFiles(t, objs, &ps, &ctr)
	socket := false
	for _, m := range ctr.VolumeMounts {
		for _, v := range ps.Volumes {
			if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == "/var/lib/kubelet/pod-resources" && m.ReadOnly {
				socket = true
			}
		}
	}
	if !socket {
		t.Error("exporter: the pod-resources directory must be mounted read-only from the host")
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

func checkAnalyzer(t *testing.T, objs []Object, dep *appsv1.Deployment, image, promURL string) {
	t.Helper()
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Error("analyzer: one replica with the Recreate strategy (one writer of the state)")
	}
	ps := dep.Spec.Template.Spec
	if ps.ServiceAccountName != "gpuwatch-analyzer" {
		t.Errorf("analyzer service account %q", ps.ServiceAccountName)
	}
	if ps.SecurityContext == nil || ps.SecurityContext.RunAsNonRoot == nil || !*ps.SecurityContext.RunAsNonRoot {
		t.Error("analyzer must run as non-root")
	}
	ctr := ps.Containers[0]
	checkTight(t, "analyzer", ctr.SecurityContext)
	if ctr.Image != image {
		t.Errorf("analyzer image %s, want %s", ctr.Image, image)
	}
	if !contains(ctr.Args, "--prometheus.url="+promURL) {
		t.Errorf("analyzer args %v, want --prometheus.url=%s", ctr.Args, promURL)
	}
	for _, e := range ctr.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("analyzer: secret %s in the environment; mount it as a file", e.ValueFrom.SecretKeyRef.Name)
		}
	}
	checkArgFiles(t, objs, &ps, &ctr)
}

// mountedFiles lists the files a container sees from its ConfigMap and
// Secret volumes.
func mountedFiles(t *testing.T, objs []Object, ps *corev1.PodSpec, ctr *corev1.Container) map[string]bool {
	t.Helper()
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	files := map[string]bool{}
	for _, v := range ps.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm := find(t, objs, "ConfigMap", v.ConfigMap.Name).Typed.(*corev1.ConfigMap)
			for k := range cm.Data {
				files[path.Join(mounts[v.Name], k)] = true
			}
		case v.Secret != nil:
			// Secrets are created by the operator, not by kustomize (see
			// smtp-secret.example.yaml): the example stands for them.
			sec := smtpSecretExample(t)
			if v.Secret.SecretName != sec.Name {
				t.Errorf("volume %s mounts secret %s; the example is %s", v.Name, v.Secret.SecretName, sec.Name)
			}
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o007 != 0 {
				t.Errorf("secret %s is readable by others", sec.Name)
			}
			for k := range sec.StringData {
				files[path.Join(mounts[v.Name], k)] = true
			}
		case v.PersistentVolumeClaim != nil:
			find(t, objs, "PersistentVolumeClaim", v.PersistentVolumeClaim.ClaimName)
		}
	}
	return files
}

// checkArgFiles: every file a flag names under a ConfigMap or Secret mount
// is there (a renamed key would otherwise only fail on the cluster).
func checkArgFiles(t *testing.T, objs []Object, ps *corev1.PodSpec, ctr *corev1.Container) {
	t.Helper()
	files := mountedFiles(t, objs, ps, ctr)
	for _, a := range ctr.Args {
		name, val, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(val, "/etc/") {
			continue
		}
		if !files[val] {
			t.Errorf("%s: %s names %s, which no mounted ConfigMap or Secret provides (have %v)", ctr.Name, name, val, files)
		}
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

func checkServicesAndMonitors(t *testing.T, objs []Object, monitorLabel string) {
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
	selects := func(sel map[string]any) []string {
		var out []string
		for w, l := range podLabels {
			set := labels.Set{}
			for k, v := range sel {
				set[k], _ = v.(string)
			}
			if len(set) > 0 && labels.SelectorFromSet(set).Matches(l) {
				out = append(out, w)
			}
		}
		sort.Strings(out)
		return out
	}
	for _, o := range objs {
		switch o.GVK.Kind {
		case "Service":
			svc := o.Typed.(*corev1.Service)
			sel := map[string]any{}
			for k, v := range svc.Spec.Selector {
				sel[k] = v
			}
			ws := selects(sel)
			if len(ws) != 1 || ws[0] != svc.Name {
				t.Errorf("service %s selects %v, want exactly its own workload", svc.Name, ws)
				continue
			}
			for _, p := range svc.Spec.Ports {
				if !portNames[ws[0]][p.TargetPort.String()] {
					t.Errorf("service %s: target port %s is not a named container port", svc.Name, p.TargetPort.String())
				}
			}
		case "PodMonitor", "ServiceMonitor":
			if o.GVK.Version != "v1" {
				t.Errorf("%s: apiVersion %s, want monitoring.coreos.com/v1", o.ID(), o.GVK.GroupVersion())
			}
			sel := Nested[map[string]any](o.Fields, "spec", "selector", "matchLabels")
			ws := selects(sel)
			if len(ws) != 1 {
				t.Errorf("%s selects %v, want one workload", o.ID(), ws)
				continue
			}
			key := "podMetricsEndpoints"
			if o.GVK.Kind == "ServiceMonitor" {
				key = "endpoints"
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
			if got := Nested[string](o.Fields, "metadata", "labels", "release"); got != monitorLabel {
				t.Errorf("%s: release label %q, want %q", o.ID(), got, monitorLabel)
			}
		}
	}
}

func smtpSecretExample(t *testing.T) *corev1.Secret {
	t.Helper()
	data, err := fs.ReadFile(kube, "smtp-secret.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode("smtp-secret.example.yaml", data)
	if err != nil || len(objs) != 1 {
		t.Fatalf("smtp-secret.example.yaml: %v", err)
	}
	sec, ok := objs[0].Typed.(*corev1.Secret)
	if !ok {
		t.Fatalf("smtp-secret.example.yaml holds a %s", objs[0].GVK.Kind)
	}
	return sec
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

// kustomizeCommand finds the reference renderer: the standalone kustomize
// (`go install sigs.k8s.io/kustomize/kustomize/v5@v5.5.0`), else kubectl's
// built-in one (recent kubectl only: Debian's 1.20 predates `labels:`).
func kustomizeCommand(t *testing.T) func(dir string) *exec.Cmd {
	t.Helper()
	if p, err := exec.LookPath("kustomize"); err == nil {
		return func(dir string) *exec.Cmd { return exec.Command(p, "build", dir) }
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return func(dir string) *exec.Cmd { return exec.Command(p, "kustomize", dir) }
	}
	testtool.Missing(t, "kustomize not installed; .ci/run installs it")
	return nil
}

// TestRenderMatchesKustomize renders each overlay with the real kustomize
// too: our renderer must agree with it object for object.
func TestRenderMatchesKustomize(t *testing.T) {
	command := kustomizeCommand(t)
	for _, dir := range append([]string{"base"}, overlays...) {
		t.Run(dir, func(t *testing.T) {
			cmd := command(path.Join("../kubernetes", dir))
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
			}
			theirs, err := Decode("kustomize output", out)
			if err != nil {
				t.Fatal(err)
			}
			ours := renderDir(t, dir)
			byID := func(objs []Object) map[string]map[string]any {
				m := map[string]map[string]any{}
				for _, o := range objs {
					m[o.ID()] = o.Fields
				}
				return m
			}
			a, b := byID(ours), byID(theirs)
			for id, f := range b {
				if !reflect.DeepEqual(a[id], f) {
					ya, _ := Encode([]Object{{Fields: a[id]}})
					yb, _ := Encode([]Object{{Fields: f}})
					t.Errorf("%s differs:\nours:\n%s\nkustomize:\n%s", id, ya, yb)
				}
			}
			for id := range a {
				if _, ok := b[id]; !ok {
					t.Errorf("%s rendered by us but not by kustomize", id)
				}
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	obj := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
	cases := []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"unknown field with line", fstest.MapFS{"k/kustomization.yaml": {Data: []byte("resources: []\ncommonLabels: {a: b}\n")}}, "line 2"},
		{"missing resource", fstest.MapFS{"k/kustomization.yaml": {Data: []byte("resources: [nope.yaml]\n")}}, "nope.yaml"},
		{"patch matches nothing", fstest.MapFS{
			"k/kustomization.yaml": {Data: []byte("resources: [a.yaml]\npatches:\n  - patch: |\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: b}\n")},
			"k/a.yaml":             {Data: []byte(obj)},
		}, "matches no resource"},
		{"selector labels", fstest.MapFS{
			"k/kustomization.yaml": {Data: []byte("resources: [a.yaml]\nlabels:\n  - pairs: {x: y}\n    includeSelectors: true\n")},
			"k/a.yaml":             {Data: []byte(obj)},
		}, "includeSelectors"},
		{"duplicate object", fstest.MapFS{
			"k/kustomization.yaml": {Data: []byte("resources: [a.yaml, b.yaml]\n")},
			"k/a.yaml":             {Data: []byte(obj)}, "k/b.yaml": {Data: []byte(obj)},
		}, "defined twice"},
		{"cycle", fstest.MapFS{"k/kustomization.yaml": {Data: []byte("resources: [../k]\n")}}, "cycle"},
		{"remote", fstest.MapFS{"k/kustomization.yaml": {Data: []byte("resources: [https://example.com/x.yaml]\n")}}, "remote"},
		{"patch breaks the object", fstest.MapFS{
			"k/kustomization.yaml": {Data: []byte("resources: [a.yaml]\npatches:\n  - patch: |\n      apiVersion: v1\n      kind: Service\n      metadata: {name: s}\n      spec: {ports: 3}\n")},
			"k/a.yaml":             {Data: []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")},
		}, "s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(c.fs, "k")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestStrategicMergeKeepsOtherContainers(t *testing.T) {
	fsys := fstest.MapFS{
		"k/kustomization.yaml": {Data: []byte("resources: [d.yaml]\nimages:\n  - {name: busybox, newTag: \"1.36\"}\npatches:\n  - patch: |\n      apiVersion: apps/v1\n      kind: Deployment\n      metadata: {name: d}\n      spec:\n        template:\n          spec:\n            containers:\n              - name: b\n                args: [x]\n")},
		"k/d.yaml": {Data: []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: d}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers:
        - {name: a, image: "busybox"}
        - {name: b, image: "registry:5000/busybox:1.0"}
`)},
	}
	objs, err := Render(fsys, "k")
	if err != nil {
		t.Fatal(err)
	}
	cs := objs[0].Typed.(*appsv1.Deployment).Spec.Template.Spec.Containers
	if len(cs) != 2 || cs[0].Name != "a" || cs[1].Name != "b" || !reflect.DeepEqual(cs[1].Args, []string{"x"}) {
		t.Fatalf("containers after patch: %+v", cs)
	}
	// The image rule names "busybox": a registry-qualified busybox is another image.
	if cs[0].Image != "busybox:1.36" || cs[1].Image != "registry:5000/busybox:1.0" {
		t.Fatalf("images %s, %s", cs[0].Image, cs[1].Image)
	}
}

func TestSplitImage(t *testing.T) {
	cases := []struct{ in, name, tag, digest string }{
		{"busybox", "busybox", "", ""},
		{"registry:5000/a/b:1.2", "registry:5000/a/b", "1.2", ""},
		{"ghcr.io/x/y@sha256:abc", "ghcr.io/x/y", "", "sha256:abc"},
		{"registry:5000/y:t@sha256:abc", "registry:5000/y", "t", "sha256:abc"},
	}
	for _, c := range cases {
		n, tg, d := SplitImage(c.in)
		if n != c.name || tg != c.tag || d != c.digest {
			t.Errorf("SplitImage(%q) = %q %q %q", c.in, n, tg, d)
		}
	}
}

func BenchmarkRenderProduction(b *testing.B) {
	for b.Loop() {
		if _, err := Render(kube, "overlays/production"); err != nil {
			b.Fatal(err)
		}
	}
}
