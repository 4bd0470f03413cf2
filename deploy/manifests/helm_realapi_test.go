package manifests

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// operatorModule is the Prometheus Operator's Go module whose zip, as the
// module proxy serves it, holds the CRDs (example/prometheus-operator-crd):
// the chart's ServiceMonitor, PodMonitor and PrometheusRule are checked
// against the operator's own schemas, not ones written here.
const operatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"

var operatorCRDs = []string{"monitoring.coreos.com_servicemonitors.yaml", "monitoring.coreos.com_podmonitors.yaml",
	"monitoring.coreos.com_prometheusrules.yaml"}

// installOperatorCRDs creates the operator's CRDs (once per cluster; they
// stay, as other tests may use them) and waits until they are served.
func installOperatorCRDs(t *testing.T) {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", operatorModule).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", operatorModule, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %s %v", operatorModule, mod.Error, err)
	}
	dyn, err := dynamic.NewForConfig(testkube.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(k8sschema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx := context.Background()
	for _, f := range operatorCRDs {
		data, err := os.ReadFile(filepath.Join(mod.Dir, "example", "prometheus-operator-crd", f))
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		u := &unstructured.Unstructured{Object: obj}
		if _, err := crds.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", u.GetName(), err)
		}
		testtool.Eventually(t, 60*time.Second, "CRD "+u.GetName()+" established", func() (bool, error) {
			got, err := crds.Get(ctx, u.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// realInstall runs `helm install` of the chart with vals into a new
// namespace of the real API server (Helm's SDK, as the helm command does),
// uninstalling it when the test ends, and checks that the API server holds
// every object the release rendered.
func realInstall(t *testing.T, vals map[string]any) (*release.Release, error) {
	t.Helper()
	cfg := testkube.Config(t)
	admin := testkube.Client(t, cfg)
	kubeconfig := os.Getenv("KUBECONFIG")
	ns := testkube.Namespace(t, admin, nil)
	name := "gw" + ns[strings.LastIndex(ns, "-"):]
	// The values files name namespaces of their own; here each goes to the test's.
	if _, ok := vals["namespaceOverride"]; ok {
		vals["namespaceOverride"] = ns
	}
	if d, ok := vals["dashboards"].(map[string]any); ok && d["namespace"] != nil {
		d["namespace"] = ns
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	ac := new(action.Configuration)
	if err := ac.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(ac)
	inst.ReleaseName, inst.Namespace, inst.Timeout = name, ns, 2*time.Minute
	rel, err := inst.Run(chrt, vals)
	t.Cleanup(func() {
		if _, err := action.NewUninstall(ac).Run(name); err != nil && rel != nil {
			t.Logf("helm uninstall: %v", err)
		}
	})
	if err != nil {
		return nil, err
	}
	objs, err := Decode("helm install", []byte(rel.Manifest))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := flags.ToRESTMapper()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		m, err := mapper.RESTMapping(o.GVK.GroupKind(), o.GVK.Version)
		if err != nil {
			t.Fatalf("%s: %v", o.ID(), err)
		}
		r := dyn.Resource(m.Resource)
		var get func() (*unstructured.Unstructured, error)
		if o.Namespace() != "" || m.Scope.Name() == "namespace" {
			objNS := cmp.Or(o.Namespace(), ns)
			get = func() (*unstructured.Unstructured, error) {
				return r.Namespace(objNS).Get(context.Background(), o.Name(), metav1.GetOptions{})
			}
		} else {
			get = func() (*unstructured.Unstructured, error) {
				return r.Get(context.Background(), o.Name(), metav1.GetOptions{})
			}
		}
		if _, err := get(); err != nil {
			t.Errorf("%s after helm install: %v", o.ID(), err)
		}
	}
	t.Logf("%d objects installed in %s as release %s", len(objs), ns, name)
	return rel, nil
}

// removeOperatorCRDs deletes the operator's CRDs, if a test installed them,
// and waits until the API server no longer serves them.
func removeOperatorCRDs(t *testing.T) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(testkube.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	crds := dyn.Resource(k8sschema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx := context.Background()
	for _, f := range operatorCRDs {
		name := strings.TrimSuffix(strings.TrimPrefix(f, "monitoring.coreos.com_"), ".yaml") + ".monitoring.coreos.com"
		if err := crds.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		testtool.Eventually(t, 60*time.Second, "CRD "+name+" gone", func() (bool, error) {
			_, err := crds.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	}
}

// TestHelmInstallOnRealAPIServerWithoutOperatorCRDs: on an API server that
// serves no Prometheus Operator CRDs, the chart's defaults install, without
// the monitors and the rule, and NOTES.txt says what was skipped and why;
// forcing them (prometheusOperator.crds=true) fails with the API server's
// own word for the missing kind. With basic auth on, the chart installs
// with the scrape Secret named on every monitor. It runs before the test
// below, which installs the CRDs again.
func TestHelmInstallOnRealAPIServerWithoutOperatorCRDs(t *testing.T) {
	removeOperatorCRDs(t)
	rel, err := realInstall(t, map[string]any{})
	if err != nil {
		t.Fatalf("helm install with defaults, no operator CRDs: %v", err)
	}
	if !strings.Contains(rel.Info.Notes, "Skipped, because this cluster serves no Prometheus Operator CRDs") {
		t.Errorf("NOTES.txt does not say the monitors were skipped:\n%s", rel.Info.Notes)
	}
	for _, kind := range []string{"kind: ServiceMonitor", "kind: PodMonitor", "kind: PrometheusRule"} {
		if strings.Contains(rel.Manifest, kind) {
			t.Errorf("%s installed on a cluster without its CRD", kind)
		}
	}
	_, err = realInstall(t, map[string]any{"prometheusOperator": map[string]any{"crds": true}})
	if err == nil || !strings.Contains(err.Error(), "monitoring.coreos.com/v1") || !strings.Contains(err.Error(), "CRDs") {
		t.Errorf("forced monitors without their CRDs: %v, want an error naming monitoring.coreos.com/v1 and the CRDs", err)
	} else {
		t.Logf("forced monitors without their CRDs: %v", err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("a password made up for this test"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	installOperatorCRDs(t)
	rel, err = realInstall(t, map[string]any{
		"webConfig": map[string]any{"config": map[string]any{"basic_auth_users": map[string]any{"prometheus": string(hash)}}, "scrapeSecret": "gpuwatch-scrape"},
		"exporter":  map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
	})
	if err != nil {
		t.Fatalf("helm install with basic auth on: %v", err)
	}
	if n := strings.Count(rel.Manifest, "name: gpuwatch-scrape"); n < 6 {
		t.Errorf("the scrape Secret is named %d times in the release, want a username and a password on each of 3 monitors", n)
	}
}

// TestHelmInstallOnRealAPIServer: `helm install` (Helm's SDK, against the
// real API server, with the Prometheus Operator's CRDs from its module)
// succeeds with the chart's defaults and with each shipped values file, and
// the API server holds every object the release rendered.
func TestHelmInstallOnRealAPIServer(t *testing.T) {
	installOperatorCRDs(t)
	for _, file := range chartValues {
		t.Run(file, func(t *testing.T) {
			vals := readValues(t, file)
			if file == "ci/exporter-only-values.yaml" {
				setOperatorHash(t, vals)
			}
			if _, err := realInstall(t, vals); err != nil {
				t.Fatalf("helm install %s: %v", file, err)
			}
		})
	}
}
