package manifests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
)

// TestShippedConfigsParse: the configuration the manifests ship is accepted
// by gpuwatch's own strict parsers, in every overlay, and the files it points
// at (the SMTP password) are mounted.
func TestShippedConfigsParse(t *testing.T) {
	for _, dir := range append([]string{"base"}, overlays...) {
		t.Run(dir, func(t *testing.T) {
			objs := renderDir(t, dir)
			an := find(t, objs, "ConfigMap", "gpuwatch-analyzer-config").Typed.(*corev1.ConfigMap)
			if _, err := config.Parse("analyzer.yml", []byte(an.Data["analyzer.yml"])); err != nil {
				t.Errorf("analyzer.yml: %v", err)
			}
			pol, err := policy.Parse([]byte(an.Data["policy.yml"]))
			if err != nil {
				t.Errorf("policy.yml: %v", err)
			} else if !pol.DryRun {
				t.Error("the shipped policy must start in dry-run")
			}
			rc, err := report.ParseConfig("report.yml", []byte(an.Data["report.yml"]))
			if err != nil {
				t.Fatalf("report.yml: %v", err)
			}
			dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
			files := mountedFiles(t, objs, &dep.Spec.Template.Spec, &dep.Spec.Template.Spec.Containers[0])
			if rc.SMTP.PasswordFile == "" || !files[rc.SMTP.PasswordFile] {
				t.Errorf("report.yml smtp.password_file %q is not a mounted file (have %v)", rc.SMTP.PasswordFile, files)
			}
			var raw map[string]any
			if err := yaml.Unmarshal([]byte(an.Data["report.yml"]), &raw); err != nil {
				t.Fatal(err)
			}
			if smtp, _ := raw["smtp"].(map[string]any); smtp["password"] != nil {
				t.Error("a password in a ConfigMap")
			}
			tm := find(t, objs, "ConfigMap", "gpuwatch-exporter-teams").Typed.(*corev1.ConfigMap)
			if _, err := teams.Parse([]byte(tm.Data["teams.yml"])); err != nil {
				t.Errorf("teams.yml: %v", err)
			}
			if wc, ok := an.Data["web-config.yml"]; ok {
				p := filepath.Join(t.TempDir(), "web-config.yml")
				if err := os.WriteFile(p, []byte(wc), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := web.Validate(p); err != nil {
					t.Errorf("web-config.yml: %v", err)
				}
			}
		})
	}
}
