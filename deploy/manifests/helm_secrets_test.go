package manifests

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestHelmSecretsNeverInConfigMaps: a chat webhook's URL (its path is its
// credential), Alertmanager's URL with basic-auth credentials, the storage
// URL and the SMTP settings, given in values, reach the pods only from
// Secrets: no ConfigMap and no container argument or plain environment
// value holds any of them, every Secret volume is closed to others, and the
// analyzer reads its policy from a mounted Secret.
func TestHelmSecretsNeverInConfigMaps(t *testing.T) {
	const hook, amPass, dbPass = "T0001/B0002/HOOKsecret77", "AMpass77secret", "DBpass77secret"
	vals := map[string]any{"analyzer": map[string]any{
		"policy": map[string]any{"dry_run": true, "channels": map[string]any{
			"webhook":      map[string]any{"url": "https://hooks.slack.com/services/" + hook, "format": "slack"},
			"alertmanager": map[string]any{"url": "http://gpuwatch:" + amPass + "@alertmanager:9093"},
		}, "tiers": []any{map[string]any{"name": "default", "rules": []any{map[string]any{"pattern": "cpu_only",
			"steps": []any{map[string]any{"action": "notify", "after": "0s"}}}}}}},
		"storage": map[string]any{"url": "postgres://gpuwatch:" + dbPass + "@db:5432/gpuwatch?sslmode=require"},
		"reports": map[string]any{"enabled": true, "smtp": map[string]any{"host": "smtp.example.org", "from": "gpuwatch@example.org"},
			"smtpSecret": map[string]any{"name": "gpuwatch-smtp", "key": "password"}},
	}}
	objs := helmTemplate(t, "gpuwatch", "gpuwatch", vals)
	secrets := []string{hook, amPass, dbPass}
	for _, o := range objs {
		switch v := o.Typed.(type) {
		case *corev1.ConfigMap:
			b, err := yaml.Marshal(v.Data)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range secrets {
				if strings.Contains(string(b), s) {
					t.Errorf("ConfigMap %s holds %s", v.Name, s)
				}
			}
		case *appsv1.Deployment, *appsv1.DaemonSet:
			var ps corev1.PodSpec
			if d, ok := v.(*appsv1.Deployment); ok {
				ps = d.Spec.Template.Spec
			} else {
				ps = v.(*appsv1.DaemonSet).Spec.Template.Spec
			}
			for _, c := range ps.Containers {
				plain := fmt.Sprint(c.Args, c.Command)
				for _, e := range c.Env {
					plain += " " + e.Value
				}
				for _, s := range secrets {
					if strings.Contains(plain, s) {
						t.Errorf("%s: container %s carries %s in its arguments or environment", o.Name(), c.Name, s)
					}
				}
			}
			for _, vol := range ps.Volumes {
				if vol.Secret != nil && (vol.Secret.DefaultMode == nil || *vol.Secret.DefaultMode&0o007 != 0) {
					t.Errorf("%s: Secret volume %s readable by others", o.Name(), vol.Name)
				}
			}
		}
	}
	dep := find(t, objs, "Deployment", "gpuwatch-analyzer").Typed.(*appsv1.Deployment)
	var configVol *corev1.Volume
	for i, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == "config" {
			configVol = &dep.Spec.Template.Spec.Volumes[i]
		}
	}
	if configVol == nil || configVol.Secret == nil {
		t.Fatalf("the analyzer's config volume (policy.yml) is not a Secret: %+v", configVol)
	}
	cfg := find(t, objs, "Secret", configVol.Secret.SecretName).Typed.(*corev1.Secret)
	if !strings.Contains(cfg.StringData["policy.yml"], hook) {
		t.Errorf("the webhook URL did not reach the policy: %s", cfg.StringData["policy.yml"])
	}
}
