package manifests

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"

	gpudash "github.com/gpuwatch/gpuwatch/dashboards"
)

// chartDir is the Helm chart under test.
const chartDir = "../helm/gpuwatch"

// chartValues are the values files the chart is tested with: its defaults
// and the examples in ci/ (chart-testing's convention).
var chartValues = []string{"", "ci/production-values.yaml", "ci/exporter-only-values.yaml", "ci/trial-values.yaml"}

// kubeVersion is the cluster version the chart is rendered for (Helm's
// client-only default, 1.20, is older than the chart supports).
var kubeVersion = &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}

func readValues(t *testing.T, file string) map[string]any {
	t.Helper()
	if file == "" {
		return map[string]any{}
	}
	v, err := chartutil.ReadValuesFile(filepath.Join(chartDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// helmTemplate renders the chart as `helm template` does, with Helm's own
// SDK, and decodes every object strictly.
func helmTemplate(t *testing.T, release, namespace string, vals map[string]any) []Object {
	t.Helper()
	objs, err := helmRender(release, namespace, vals)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func helmRender(release, namespace string, vals map[string]any) ([]Object, error) {
	objs, _, err := helmInstall(release, namespace, vals, operatorAPIs)
	return objs, err
}

// operatorAPIs are what a cluster with the Prometheus Operator's CRDs
// serves, as Helm's capabilities list them.
var operatorAPIs = chartutil.VersionSet{"monitoring.coreos.com/v1", "monitoring.coreos.com/v1/ServiceMonitor",
	"monitoring.coreos.com/v1/PodMonitor", "monitoring.coreos.com/v1/PrometheusRule"}

// helmInstall renders the chart as `helm install --dry-run` does for a
// cluster that serves apis (besides the built-in ones), and returns the
// objects and NOTES.txt.
func helmInstall(release, namespace string, vals map[string]any, apis chartutil.VersionSet) ([]Object, string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, "", err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	inst.KubeVersion = kubeVersion
	inst.APIVersions = apis
	rel, err := inst.Run(chrt, vals)
	if err != nil {
		return nil, "", err
	}
	objs, err := Decode("helm template", []byte(rel.Manifest))
	return objs, rel.Info.Notes, err
}

// TestHelmLint runs `helm lint --strict` on the chart with each values file.
func TestHelmLint(t *testing.T) {
	for _, file := range chartValues {
		t.Run(file, func(t *testing.T) {
			lint := action.NewLint()
			lint.Strict = true
			lint.Namespace = "gpuwatch"
			lint.KubeVersion = kubeVersion
			res := lint.Run([]string{chartDir}, readValues(t, file))
			for _, m := range res.Messages {
				if m.Severity > support.InfoSev {
					t.Errorf("lint: %s", m)
				}
			}
			for _, err := range res.Errors {
				t.Errorf("lint: %v", err)
			}
		})
	}
}

// TestHelmChart renders the chart with each values file and runs the same
// checks as for the kustomize overlays, plus what each file promises.
func TestHelmChart(t *testing.T) {
	external := map[string][]string{
		"gpuwatch-smtp": {"password"}, "gpuwatch-web-config": {"web-config.yml"},
		"gpuwatch-tls": {"tls.crt", "tls.key", "ca.crt"},
	}
	base := rendering{namespace: "gpuwatch",
		exporterImage: "ghcr.io/gpuwatch/gpuwatch-exporter:" + appVersion(t), analyzerImage: "ghcr.io/gpuwatch/gpuwatch-analyzer:" + appVersion(t),
		prometheusURL: "http://prometheus-operated.monitoring.svc:9090", podResources: true,
		labels: map[string]string{"app.kubernetes.io/part-of": "gpuwatch", "app.kubernetes.io/managed-by": "Helm"}}
	cases := map[string]func(r *rendering){
		"": func(*rendering) {},
		"ci/production-values.yaml": func(r *rendering) {
			r.namespace = "gpuwatch-system"
			r.exporterImage = "registry.example.com/gpuwatch/gpuwatch-exporter@sha256:0f3bd1c9b8d8e0a5b3e8a86c8bca3b2e3c3a8a9f4d4a6b0e8e5a5c1f2d3e4f50"
			r.analyzerImage = "registry.example.com/gpuwatch/gpuwatch-analyzer:v0.1.0"
			r.prometheusURL = "http://thanos-query.monitoring.svc:9090"
			r.exporterPriority = "system-node-critical"
			r.labels["environment"] = "production"
			r.monitorLabels = map[string]string{"release": "kube-prometheus-stack"}
			r.externalSecrets = external
		},
		"ci/exporter-only-values.yaml": func(r *rendering) { r.podResources = false },
		"ci/trial-values.yaml":         func(r *rendering) { r.sim, r.dashboardNamespace = true, "monitoring" },
	}
	for _, file := range chartValues {
		t.Run(file, func(t *testing.T) {
			r := base
			r.labels = map[string]string{}
			for k, v := range base.labels {
				r.labels[k] = v
			}
			cases[file](&r)
			vals := readValues(t, file)
			if file == "ci/exporter-only-values.yaml" {
				// The file ships a placeholder where the operator's hash goes.
				setOperatorHash(t, vals)
			}
			r.objs = helmTemplate(t, "gpuwatch", "gpuwatch", vals)
			checkRendering(t, r)
			kinds := map[string]int{}
			for _, o := range r.objs {
				kinds[o.GVK.Kind]++
			}
			checkChartExtras(t, file, r, kinds)
		})
	}
}

// setOperatorHash puts a hash of a password made up here where
// basic_auth_users holds the shipped placeholder.
func setOperatorHash(t *testing.T, vals map[string]any) {
	t.Helper()
	users := Nested[map[string]any](vals, "webConfig", "config", "basic_auth_users")
	if users["prometheus"] != "REPLACE-WITH-A-BCRYPT-HASH" {
		t.Fatalf("basic_auth_users.prometheus = %v, want the placeholder", users["prometheus"])
	}
	h, err := bcrypt.GenerateFromPassword([]byte("the operator's password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users["prometheus"] = string(h)
}

func appVersion(t *testing.T) string {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c.Metadata.AppVersion
}

// checkChartExtras checks what each values file is there to show.
func checkChartExtras(t *testing.T, file string, r rendering, kinds map[string]int) {
	t.Helper()
	dashboards, rules := 0, kinds["PrometheusRule"]
	for _, o := range r.objs {
		if cm, ok := o.Typed.(*corev1.ConfigMap); ok && cm.Labels["grafana_dashboard"] != "" {
			dashboards++
		}
	}
	switch file {
	case "":
		want := map[string]int{"DaemonSet": 1, "Deployment": 1, "PodMonitor": 1, "ServiceMonitor": 0, "PrometheusRule": 1,
			"ClusterRole": 1, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "PersistentVolumeClaim": 1,
			"Secret": 1} // the analyzer's config: its policy holds the webhook URL
		for k, n := range want {
			if kinds[k] != n {
				t.Errorf("%d %s, want %d (all kinds: %v)", kinds[k], k, n, kinds)
			}
		}
		// One ConfigMap per dashboard the project ships.
		if dashboards != len(gpudash.All()) || rules != 1 {
			t.Errorf("%d dashboard ConfigMaps and %d PrometheusRules, want %d and 1", dashboards, rules, len(gpudash.All()))
		}
	case "ci/production-values.yaml":
		if kinds["PodMonitor"] != 0 || kinds["ServiceMonitor"] != 2 {
			t.Errorf("monitors %v: want the exporter's and the analyzer's ServiceMonitor only", kinds)
		}
		ds := find(t, r.objs, "DaemonSet", "gpuwatch-exporter")
		ps := Nested[map[string]any](ds.Fields, "spec", "template", "spec")
		if ps["runtimeClassName"] != "nvidia" || ps["imagePullSecrets"] == nil || ps["affinity"] == nil {
			t.Errorf("exporter pod spec lacks runtimeClassName, imagePullSecrets or affinity: %v", ps)
		}
		args := strings.Join(containerArgs(ds), " ")
		for _, a := range []string{"--no-collector.gpm", "--web.config.file=/etc/gpuwatch/web/web-config.yml"} {
			if !strings.Contains(args, a) {
				t.Errorf("exporter args %s lack %s", args, a)
			}
		}
		dep := find(t, r.objs, "Deployment", "gpuwatch-analyzer")
		if !strings.Contains(strings.Join(containerArgs(dep), " "), "--report.config=") {
			t.Error("analyzer: reports enabled but no --report.config")
		}
	case "ci/exporter-only-values.yaml":
		for _, k := range []string{"Deployment", "PrometheusRule", "ServiceMonitor", "ClusterRole"} {
			if kinds[k] != 0 {
				t.Errorf("%d %s in an exporter-only rendering", kinds[k], k)
			}
		}
		if dashboards != 0 || kinds["Secret"] != 1 || kinds["ServiceMonitor"] != 0 {
			t.Errorf("%d dashboards and %d Secrets, want 0 and the web config's", dashboards, kinds["Secret"])
		}
	case "ci/trial-values.yaml":
		if kinds["PersistentVolumeClaim"] != 0 || kinds["ClusterRole"] != 0 {
			t.Errorf("kinds %v: no persistence and no RBAC in a trial", kinds)
		}
		for _, o := range r.objs {
			if cm, ok := o.Typed.(*corev1.ConfigMap); ok && cm.Labels["grafana_dashboard"] != "" &&
				(cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "gpuwatch") {
				t.Errorf("dashboard %s/%s labelled %v", cm.Namespace, cm.Name, cm.Labels)
			}
		}
		find(t, r.objs, "DaemonSet", "gw-exporter")
	}
}

func containerArgs(o Object) []string {
	cs := Nested[[]any](o.Fields, "spec", "template", "spec", "containers")
	var out []string
	for _, a := range cs[0].(map[string]any)["args"].([]any) {
		out = append(out, a.(string))
	}
	return out
}

// TestHelmChartRefusesBadValues: values that would deploy something broken
// fail at render time with a message naming the key.
func TestHelmChartRefusesBadValues(t *testing.T) {
	cases := map[string]struct {
		vals map[string]any
		want string
	}{
		"reports without SMTP":    {map[string]any{"analyzer": map[string]any{"reports": map[string]any{"enabled": true}}}, "analyzer.reports.smtp.host"},
		"two analyzers on SQLite": {map[string]any{"analyzer": map[string]any{"replicas": 2}}, "analyzer.replicas > 1 needs a shared store"},
		"ServiceMonitor without Service": {map[string]any{"exporter": map[string]any{
			"service": map[string]any{"enabled": false}, "serviceMonitor": map[string]any{"enabled": true}}}, "exporter.service.enabled"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := helmRender("gpuwatch", "gpuwatch", c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
}

// With a PostgreSQL URL the analyzer runs two replicas on the shared store
// (leader election picks the acting one): the URL reaches it from a Secret,
// never as an argument, and no SQLite file or volume claim is made. One
// replica on SQLite stays the default.
func TestHelmChartSharedStore(t *testing.T) {
	const url = "postgres://gw:s3cret@db.gpuwatch.svc:5432/gw?sslmode=require"
	dep := func(objs []Object) (int64, []string, []any) {
		d := find(t, objs, "Deployment", "gpuwatch-analyzer")
		n, _ := Nested[any](d.Fields, "spec", "replicas").(float64)
		if i, ok := Nested[any](d.Fields, "spec", "replicas").(int64); ok {
			n = float64(i)
		}
		env, _ := Nested[[]any](d.Fields, "spec", "template", "spec", "containers")[0].(map[string]any)["env"].([]any)
		return int64(n), containerArgs(d), env
	}
	hasNamed := func(objs []Object, kind, name string) bool {
		return slices.ContainsFunc(objs, func(o Object) bool { return o.GVK.Kind == kind && o.Name() == name })
	}
	has := func(objs []Object, kind string) bool {
		for _, o := range objs {
			if o.GVK.Kind == kind && strings.HasPrefix(o.Name(), "gpuwatch-analyzer") {
				return true
			}
		}
		return false
	}
	objs := helmTemplate(t, "gpuwatch", "gpuwatch", nil)
	n, args, _ := dep(objs)
	if n != 1 || !slices.Contains(args, "--storage.path=/var/lib/gpuwatch/gpuwatch.db") || !has(objs, "PersistentVolumeClaim") {
		t.Fatalf("defaults: %d replicas, args %v, PVC %v; want 1 on the SQLite file", n, args, has(objs, "PersistentVolumeClaim"))
	}
	objs = helmTemplate(t, "gpuwatch", "gpuwatch", map[string]any{"analyzer": map[string]any{"storage": map[string]any{"url": url}}})
	n, args, env := dep(objs)
	if n != 2 {
		t.Errorf("shared store: %d replicas, want 2", n)
	}
	for _, a := range args {
		if strings.HasPrefix(a, "--storage.") || strings.Contains(a, "s3cret") {
			t.Errorf("shared store: argument %q (the URL goes through the environment, from a Secret)", a)
		}
	}
	if !slices.Contains(args, "--kubernetes.lease-namespace=gpuwatch") {
		t.Errorf("shared store: no Lease election in %v", args)
	}
	if len(env) != 1 || Nested[string](env[0].(map[string]any), "name") != "GPUWATCH_STORAGE_URL" ||
		Nested[string](env[0].(map[string]any), "valueFrom", "secretKeyRef", "name") != "gpuwatch-analyzer-storage" {
		t.Errorf("shared store: env %v", env)
	}
	sec := find(t, objs, "Secret", "gpuwatch-analyzer-storage")
	if Nested[string](sec.Fields, "stringData", "url") != url {
		t.Errorf("storage Secret %v", sec.Fields)
	}
	if has(objs, "PersistentVolumeClaim") {
		t.Error("shared store: a volume claim for a SQLite file nobody writes")
	}
	objs = helmTemplate(t, "gpuwatch", "gpuwatch", map[string]any{"analyzer": map[string]any{"replicas": 3,
		"storage": map[string]any{"existingSecret": map[string]any{"name": "pg", "key": "dsn"}}}})
	n, _, env = dep(objs)
	if n != 3 || Nested[string](env[0].(map[string]any), "valueFrom", "secretKeyRef", "name") != "pg" ||
		Nested[string](env[0].(map[string]any), "valueFrom", "secretKeyRef", "key") != "dsn" || hasNamed(objs, "Secret", "gpuwatch-analyzer-storage") {
		t.Errorf("existing Secret: %d replicas, env %v", n, env)
	}
}
