package manifests

import (
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/policy"
)

// TestHelmDefaultsAreSafe: out of the box the analyzer listens on loopback
// (its page shows every finding and the audit log, and nothing asks for
// auth), gets the teams file, and its policy notifies and warns but reclaims
// nothing; NOTES.txt tells the next step.
func TestHelmDefaultsAreSafe(t *testing.T) {
	objs, notes, err := helmInstall("gpuwatch", "gpuwatch", map[string]any{}, operatorAPIs)
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
	ctr := dep.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--web.listen-address=127.0.0.1:9836", "--teams.file=/etc/gpuwatch/teams/teams.yml"} {
		if !slices.Contains(ctr.Args, want) {
			t.Errorf("analyzer args %v lack %s", ctr.Args, want)
		}
	}
	if ctr.LivenessProbe != nil || ctr.ReadinessProbe != nil {
		t.Error("probes on a loopback-only listener: the kubelet cannot reach it")
	}
	teamsMounted := false
	for _, m := range ctr.VolumeMounts {
		teamsMounted = teamsMounted || m.MountPath == "/etc/gpuwatch/teams"
	}
	if !teamsMounted {
		t.Error("--teams.file names a file that is not mounted")
	}
	for _, o := range objs {
		if o.GVK.Kind == "ServiceMonitor" && strings.Contains(o.Name(), "analyzer") {
			t.Errorf("a ServiceMonitor for an analyzer that listens on loopback only")
		}
	}
	cfg := find(t, objs, "Secret", "gpuwatch-analyzer-config").Typed.(*corev1.Secret)
	pol, err := policy.ParseFile("policy.yml", []byte(cfg.StringData["policy.yml"]))
	if err != nil {
		t.Fatal(err)
	}
	if !pol.DryRun || len(pol.Tiers) == 0 {
		t.Fatalf("default policy: dry_run=%v, %d tiers", pol.DryRun, len(pol.Tiers))
	}
	for _, tier := range pol.Tiers {
		if tier.Reclaim {
			t.Errorf("tier %s reclaims by default", tier.Name)
		}
		for _, r := range tier.Rules {
			for _, s := range r.Steps {
				if s.Action != policy.StepNotify && s.Action != policy.StepWarn {
					t.Errorf("tier %s rule %s has a %s step by default", tier.Name, r.Pattern, s.Action)
				}
			}
		}
	}
	for _, want := range []string{"port-forward deploy/gpuwatch-analyzer 9836", "It listens on 127.0.0.1 only", "gpuwatch-analyzer audit", "Next:"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	if strings.Contains(notes, "Skipped") {
		t.Errorf("NOTES.txt says something was skipped on a cluster with the CRDs:\n%s", notes)
	}
}

// TestHelmWithoutOperatorCRDs: on a cluster without the Prometheus
// Operator the chart installs without its monitors and rule and NOTES.txt
// names each one skipped; prometheusOperator.crds=true renders them anyway
// (helm template for GitOps).
func TestHelmWithoutOperatorCRDs(t *testing.T) {
	crdKinds := []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}
	objs, notes, err := helmInstall("gpuwatch", "gpuwatch", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if slices.Contains(crdKinds, o.GVK.Kind) {
			t.Errorf("%s %s rendered for a cluster without its CRD", o.GVK.Kind, o.Name())
		}
	}
	for _, want := range []string{"Skipped, because this cluster serves no Prometheus Operator CRDs for them: the exporter's PodMonitor, the analyzer's ServiceMonitor, the PrometheusRule.",
		"prometheusOperator.crds=true"} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES.txt lacks %q:\n%s", want, notes)
		}
	}
	objs, _, err = helmInstall("gpuwatch", "gpuwatch", map[string]any{"prometheusOperator": map[string]any{"crds": true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		if slices.Contains(crdKinds, o.GVK.Kind) {
			n++
		}
	}
	if n != 2 { // the exporter's PodMonitor and the PrometheusRule (the analyzer is on loopback)
		t.Errorf("prometheusOperator.crds=true rendered %d Operator objects, want 2", n)
	}
}

// TestHelmAuthOn: with basic auth in the web config, the analyzer serves on
// the pod's address with TCP probes and every monitor scrapes with the
// credentials of webConfig.scrapeSecret; without them the chart refuses,
// naming the key.
func TestHelmAuthOn(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("a password made up for this test"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	vals := func(scrape string) map[string]any {
		return map[string]any{
			"webConfig": map[string]any{"config": map[string]any{"basic_auth_users": map[string]any{"prometheus": string(hash)}}, "scrapeSecret": scrape},
			"exporter":  map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		}
	}
	objs, _, err := helmInstall("gpuwatch", "gpuwatch", vals("gpuwatch-scrape"), operatorAPIs)
	if err != nil {
		t.Fatal(err)
	}
	dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
	ctr := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(ctr.Args, "--web.listen-address=:9836") || ctr.LivenessProbe == nil || ctr.LivenessProbe.TCPSocket == nil {
		t.Errorf("analyzer with auth: args %v, liveness %+v; want all interfaces and a TCP probe", ctr.Args, ctr.LivenessProbe)
	}
	monitors := 0
	for _, o := range objs {
		var eps []any
		switch o.GVK.Kind {
		case "ServiceMonitor":
			eps = Nested[[]any](o.Fields, "spec", "endpoints")
		case "PodMonitor":
			eps = Nested[[]any](o.Fields, "spec", "podMetricsEndpoints")
		default:
			continue
		}
		monitors++
		for _, e := range eps {
			ba, _ := e.(map[string]any)["basicAuth"].(map[string]any)
			user, _ := ba["username"].(map[string]any)
			pass, _ := ba["password"].(map[string]any)
			if user["name"] != "gpuwatch-scrape" || user["key"] != "username" || pass["name"] != "gpuwatch-scrape" || pass["key"] != "password" {
				t.Errorf("%s %s scrapes without the scrape Secret's credentials: %v", o.GVK.Kind, o.Name(), e)
			}
		}
	}
	if monitors != 3 {
		t.Errorf("%d monitors, want the exporter's PodMonitor and ServiceMonitor and the analyzer's ServiceMonitor", monitors)
	}
	if _, _, err := helmInstall("gpuwatch", "gpuwatch", vals(""), operatorAPIs); err == nil || !strings.Contains(err.Error(), "webConfig.scrapeSecret") {
		t.Errorf("basic auth without scrape credentials: error %v, want one naming webConfig.scrapeSecret", err)
	}
}
