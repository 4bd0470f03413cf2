package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReclaimCommandsExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("tiers:\n  - name: dev\n    reclam: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := "../../deploy/examples/policy.yaml"
	for _, tc := range []struct {
		name string
		args []string
		want int
		msgs []string
	}{
		{"check good policy", []string{"check-config", "--policy.file=" + good}, 0, nil},
		{"check good policy, old spelling", []string{"check-config", "--policy=" + good}, 0, nil},
		{"check bad policy", []string{"check-config", "--policy.file=" + bad}, 2, []string{"bad.yaml:3: tiers[0].reclam", "unknown key"}},
		{"check missing policy", []string{"check-config", "--policy=" + filepath.Join(dir, "absent.yaml")}, 2, []string{"absent.yaml"}},
		{"check nothing", []string{"check-config"}, 2, []string{"--policy.file", "--analyzer.config"}},
		{"analyzer needs a policy", []string{"analyzer"}, 2, []string{"policy.file"}},
		{"analyzer bad policy", []string{"analyzer", "--policy.file=" + bad}, 2, []string{"bad.yaml:3: tiers[0].reclam"}},
		{"analyzer bad schedule", []string{"analyzer", "--policy.file=" + good, "--schedule=every so often"}, 2, []string{"--schedule"}},
		{"analyzer no findings", []string{"analyzer", "--policy.file=" + good, "--storage.path=" + filepath.Join(dir, "s.db"), "--once"}, 2, []string{"--prometheus.url"}},
		{"audit no store", []string{"audit", "--storage.path=" + filepath.Join(dir, "none.db")}, 2, []string{"none.db"}},
		{"audit bad format", []string{"audit", "--format=xml"}, 2, []string{"table,json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(tc.args, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
			for _, m := range tc.msgs {
				if !strings.Contains(stderr.String(), m) {
					t.Errorf("stderr lacks %q: %s", m, stderr.String())
				}
			}
		})
	}
}
