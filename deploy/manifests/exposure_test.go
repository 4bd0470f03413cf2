package manifests

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// analyzerDefaultListen is the analyzer's --web.listen-address when none is
// given: every interface.
const analyzerDefaultListen = ":9836"

// analyzerExposure lists each way a rendering lets the analyzer's page
// (every user's findings and the audit log) be read without credentials: a
// Service port that reaches a listener on the pod's address whose web
// config asks for no authentication. A loopback-only listener is out of a
// Service's reach (kubectl port-forward still gets there); a ServiceMonitor
// on it would only ever scrape a refused connection, so that is listed too.
func analyzerExposure(t *testing.T, r rendering) []string {
	t.Helper()
	var out []string
	for _, o := range r.objs {
		dep, ok := o.Typed.(*appsv1.Deployment)
		if !ok || dep.Spec.Template.Labels["app.kubernetes.io/component"] != "analyzer" {
			continue
		}
		ps := &dep.Spec.Template.Spec
		ctr := &ps.Containers[0]
		auth, authWhy := webConfigAsksAuth(t, r, ps, ctr)
		for _, so := range r.objs {
			svc, ok := so.Typed.(*corev1.Service)
			if !ok || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
				continue
			}
			for _, p := range svc.Spec.Ports {
				port := containerPort(ctr, p.TargetPort.String())
				listen := listenerOn(ctr.Args, port)
				switch {
				case listen == "":
					// No listener on that port: nothing to reach.
				case loopback(listen):
					if m := monitorOf(r.objs, svc); m != "" {
						out = append(out, fmt.Sprintf("%s scrapes Service %s, whose analyzer listens on %s only: every scrape is refused", m, svc.Name, listen))
					}
				case !auth:
					out = append(out, fmt.Sprintf("Service %s port %d reaches the analyzer's page on %s without authentication (%s)", svc.Name, p.Port, listen, authWhy))
				}
			}
		}
	}
	return out
}

// containerPort is the number a Service's targetPort (a name or a number)
// names on ctr, or 0.
func containerPort(ctr *corev1.Container, target string) int {
	if n, err := strconv.Atoi(target); err == nil {
		return n
	}
	for _, p := range ctr.Ports {
		if p.Name == target {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// listenerOn is the --web.listen-address of args on port, or "".
func listenerOn(args []string, port int) string {
	var addrs []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addrs = append(addrs, v)
		}
	}
	if len(addrs) == 0 {
		addrs = []string{analyzerDefaultListen}
	}
	for _, a := range addrs {
		if _, p, err := net.SplitHostPort(a); err == nil && p == strconv.Itoa(port) {
			return a
		}
	}
	return ""
}

func loopback(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// webConfigAsksAuth reports whether the container's --web.config.file makes
// clients authenticate (basic auth users, or a required client
// certificate), and why not when it does not. A Secret the operator creates
// is taken to (the production overlay's comments say how to write it, and
// TestProductionAuthWorks checks that recipe).
func webConfigAsksAuth(t *testing.T, r rendering, ps *corev1.PodSpec, ctr *corev1.Container) (bool, string) {
	t.Helper()
	file := ""
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--web.config.file="); ok {
			file = v
		}
	}
	if file == "" {
		return false, "no --web.config.file"
	}
	content, ok := mountedFiles(t, r, ps, ctr)[file]
	switch {
	case !ok:
		return false, file + " is not mounted"
	case content == nil:
		return true, ""
	}
	var wc struct {
		Users map[string]string `yaml:"basic_auth_users"`
		TLS   struct {
			ClientAuth string `yaml:"client_auth_type"`
		} `yaml:"tls_server_config"`
	}
	if err := yaml.Unmarshal(content, &wc); err != nil {
		return false, fmt.Sprintf("%s: %v", file, err)
	}
	if len(wc.Users) > 0 || slices.Contains([]string{"RequireAndVerifyClientCert", "RequireAnyClientCert"}, wc.TLS.ClientAuth) {
		return true, ""
	}
	return false, file + " asks for neither basic auth nor a client certificate"
}

// monitorOf names the ServiceMonitor that selects svc, if one does.
func monitorOf(objs []Object, svc *corev1.Service) string {
	for _, o := range objs {
		if o.GVK.Kind != "ServiceMonitor" || o.Namespace() != svc.Namespace {
			continue
		}
		sel := map[string]string{}
		for k, v := range Nested[map[string]any](o.Fields, "spec", "selector", "matchLabels") {
			sel[k], _ = v.(string)
		}
		if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(svc.Labels)) {
			return o.ID()
		}
	}
	return ""
}

// TestAnalyzerExposureCaught: the check finds what the Kubernetes-only
// overlay used to ship (the analyzer on :9836 behind a Service, no web
// config, a ServiceMonitor), and accepts the same objects once the analyzer
// listens on loopback without the monitor, or asks for a password.
func TestAnalyzerExposureCaught(t *testing.T) {
	objs := renderDir(t, "overlays/production")
	dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
	ctr := &dep.Spec.Template.Spec.Containers[0]
	secured := slices.Clone(ctr.Args)
	r := rendering{objs: objs, externalSecrets: map[string][]string{"gpuwatch-smtp": {"password"}, "gpuwatch-web-config": {"web-config.yml"}}}
	if got := analyzerExposure(t, r); len(got) != 0 {
		t.Fatalf("the production overlay (basic auth): %v", got)
	}
	// The old Kubernetes-only overlay: no web config.
	ctr.Args = slices.DeleteFunc(slices.Clone(secured), func(a string) bool { return strings.HasPrefix(a, "--web.config.file=") })
	if got := analyzerExposure(t, r); len(got) != 1 || !strings.Contains(got[0], "without authentication (no --web.config.file)") {
		t.Errorf("the analyzer on :9836 without a web config: %v, want the Service named as open", got)
	}
	// The same on loopback: out of the Service's reach, but the monitor
	// scrapes nothing.
	for i, a := range ctr.Args {
		if strings.HasPrefix(a, "--web.listen-address=") {
			ctr.Args[i] = "--web.listen-address=127.0.0.1:9836"
		}
	}
	if got := analyzerExposure(t, r); len(got) != 1 || !strings.Contains(got[0], "listens on 127.0.0.1:9836 only") {
		t.Errorf("the analyzer on loopback with a ServiceMonitor: %v, want the monitor named", got)
	}
	// No flag at all: the analyzer's default is every interface.
	ctr.Args = slices.DeleteFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--web.listen-address=") })
	if got := analyzerExposure(t, r); len(got) != 1 || !strings.Contains(got[0], "on :9836 without authentication") {
		t.Errorf("the analyzer without --web.listen-address: %v, want the Service named as open", got)
	}
}
