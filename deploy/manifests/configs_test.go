package manifests

import (
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
)

// checkConfigFile parses a configuration file a flag names with gpuwatch's
// own strict parser; files it names in turn (the SMTP password, TLS
// certificates) must be mounted too. content is nil for a Secret the
// operator creates.
func checkConfigFile(t *testing.T, r rendering, ps *corev1.PodSpec, ctr *corev1.Container, files map[string][]byte, flag, path string, content []byte) {
	t.Helper()
	if content == nil {
		return
	}
	switch flag {
	case "attribution.teams-file":
		tm, err := teams.Parse(content)
		if err != nil {
			t.Errorf("%s %s: %v", ctr.Name, path, err)
		} else if len(tm.Warnings) > 0 {
			// Shipped files use the current snake_case keys, not the deprecated ones.
			t.Errorf("%s %s: %v", ctr.Name, path, tm.Warnings)
		}
	case "analyzer.config":
		if _, err := config.Parse(path, content); err != nil {
			t.Errorf("%s %s: %v", ctr.Name, path, err)
		}
	case "policy.file":
		pol, err := policy.ParseFile(path, content)
		if err != nil {
			t.Errorf("%s %s: %v", ctr.Name, path, err)
		} else if !pol.DryRun {
			t.Errorf("%s %s: the shipped policy must start in dry-run", ctr.Name, path)
		}
	case "report.config":
		rc, err := report.ParseConfig(path, content)
		if err != nil {
			t.Errorf("%s %s: %v", ctr.Name, path, err)
			return
		}
		if _, ok := files[rc.SMTP.PasswordFile]; rc.SMTP.PasswordFile != "" && !ok {
			t.Errorf("%s: smtp.password_file %q is not a mounted file", path, rc.SMTP.PasswordFile)
		}
		var raw map[string]any
		if err := yaml.Unmarshal(content, &raw); err != nil {
			t.Fatal(err)
		}
		if smtp, _ := raw["smtp"].(map[string]any); smtp["password"] != nil {
			t.Errorf("%s: a password in a ConfigMap", path)
		}
	case "web.config.file":
		p := filepath.Join(t.TempDir(), "web-config.yml")
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		var wc struct {
			TLS struct {
				Cert     string `yaml:"cert_file"`
				Key      string `yaml:"key_file"`
				ClientCA string `yaml:"client_ca_file"`
			} `yaml:"tls_server_config"`
			Users map[string]string `yaml:"basic_auth_users"`
		}
		if err := yaml.Unmarshal(content, &wc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, f := range []string{wc.TLS.Cert, wc.TLS.Key, wc.TLS.ClientCA} {
			if _, ok := files[f]; f != "" && !ok {
				t.Errorf("%s: %s is not a mounted file", path, f)
			}
		}
		if wc.TLS.Cert == "" { // with TLS, Validate would read the certificate files
			if err := web.Validate(p); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
		if wc.TLS.Cert == "" && len(wc.Users) == 0 {
			t.Errorf("%s: neither TLS nor users: an empty web config protects nothing", path)
		}
	}
}

// TestDryRunNeedsNoSecret: the base and the Kubernetes-only overlay start
// the analyzer without an SMTP server or any Secret, for a dry-run trial.
func TestDryRunNeedsNoSecret(t *testing.T) {
	for _, dir := range []string{"base", "overlays/slurm-free-k8s"} {
		dep := find(t, renderDir(t, dir), "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Secret != nil {
				t.Errorf("%s: the analyzer mounts Secret %s", dir, v.Secret.SecretName)
			}
		}
		for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--report.config") {
				t.Errorf("%s: %s needs an SMTP server", dir, a)
			}
		}
	}
}

// TestProductionAuthWorks: the production overlay's web config comes from
// a Secret the operator creates (no shipped file holds a working hash), and
// the file its comments tell them to write works: exporter-toolkit refuses
// no credentials and a wrong password and accepts the operator's own.
func TestProductionAuthWorks(t *testing.T) {
	objs := renderDir(t, "overlays/production")
	for _, o := range objs {
		if cm, ok := o.Typed.(*corev1.ConfigMap); ok {
			for k, v := range cm.Data {
				if strings.Contains(v, "basic_auth_users") {
					t.Errorf("ConfigMap %s key %s holds basic_auth_users: the web config belongs in the operator's Secret", cm.Name, k)
				}
			}
		}
	}
	dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
	mounted := false
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "gpuwatch-web-config" {
			for _, m := range dep.Spec.Template.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name && m.MountPath == "/etc/gpuwatch/web" {
					mounted = true
				}
			}
		}
	}
	if !mounted || !slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--web.config.file=/etc/gpuwatch/web/web-config.yml") {
		t.Fatalf("the analyzer does not read its web config from the Secret gpuwatch-web-config at /etc/gpuwatch/web")
	}
	// What the comments tell the operator to write, with their own password.
	const password = "an operator's own password"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), 10)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "web-config.yml")
	if err := os.WriteFile(p, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ok, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = web.Serve(l, srv, &web.FlagConfig{WebConfigFile: &p}, slog.New(slog.DiscardHandler)) }()
	defer srv.Close()
	url := "http://" + l.Addr().String()
	for _, c := range []struct {
		user, pass string
		want       int
	}{{"", "", 401}, {"prometheus", "wrong", 401}, {"prometheus", password, 200}} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if c.user != "" {
			req.SetBasicAuth(c.user, c.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("user %q password %q: status %d, want %d", c.user, c.pass, resp.StatusCode, c.want)
		}
	}
}
