package manifests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/gpuwatch/gpuwatch/internal/testkube"
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
		testkube.Eventually(t, 60*time.Second, "CRD "+u.GetName()+" established", func() (bool, error) {
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

// TestHelmInstallOnRealAPIServer: `helm install` (Helm's SDK, against the
// real API server, with the Prometheus Operator's CRDs from its module)
// succeeds with the chart's defaults and with each shipped values file, and
// the API server holds every object the release rendered.
func TestHelmInstallOnRealAPIServer(t *testing.T) {
	cfg := testkube.Config(t)
	admin := testkube.Client(t, cfg)
	installOperatorCRDs(t)
	kubeconfig := os.Getenv("KUBECONFIG")
	for _, file := range chartValues {
		t.Run(file, func(t *testing.T) {
			ns := testkube.Namespace(t, admin, nil)
			release := "gw" + ns[strings.LastIndex(ns, "-"):]
			vals := readValues(t, file)
			// The files name namespaces of their own; here each goes to the test's.
			if _, ok := vals["namespaceOverride"]; ok {
				vals["namespaceOverride"] = ns
			}
			if d, ok := vals["dashboards"].(map[string]any); ok && d["namespace"] != nil {
				d["namespace"] = ns
			}
			if file == "ci/exporter-only-values.yaml" {
				setOperatorHash(t, vals)
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
			inst.ReleaseName, inst.Namespace, inst.Timeout = release, ns, 2*time.Minute
			rel, err := inst.Run(chrt, vals)
			if err != nil {
				t.Fatalf("helm install %s: %v", file, err)
			}
			t.Cleanup(func() {
				un := action.NewUninstall(ac)
				if _, err := un.Run(release); err != nil {
					t.Logf("helm uninstall: %v", err)
				}
			})
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
					objNS := o.Namespace()
					if objNS == "" {
						objNS = ns
					}
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
			t.Logf("%s: %d objects installed in %s as release %s", file, len(objs), ns, release)
		})
	}
}
