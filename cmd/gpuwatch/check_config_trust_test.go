package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckConfigWorkloadFields: check-config, run as a real process, warns
// once per tier and exemption that a field the workload writes can sway,
// naming who can write it, and exits 0 for warnings alone; a tier chosen by
// an untrusted pod label is an error at its line (exit 2).
func TestCheckConfigWorkloadFields(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trusted := write("trusted.yml", `trust_workload_keys:
  labels: [tier]
  annotations: [gpuwatch.io/exempt]
  job_names: true
tiers:
  - name: prod
    match: {labels: {tier: production}}
    rules: [{pattern: cpu_only, steps: [{action: warn}]}]
  - name: sweeps
    match: {job_names: [sweep-*]}
    rules: [{pattern: cpu_only, steps: [{action: warn}]}]
  - name: infra
    match: {teams: [ml-infra]}
    rules: [{pattern: cpu_only, steps: [{action: warn}]}]
`)
	untrusted := write("untrusted.yml", "tiers:\n  - name: prod\n    match:\n      labels: {tier: production}\n    rules: [{pattern: cpu_only, steps: [{action: warn}]}]\n")
	teamsFile := write("teams.yml", "team:\n  namespaces: {research: research}\n  pod_label: team\n")
	for _, c := range []struct {
		name  string
		args  []string
		code  int
		want  []string
		count int // lines starting "warning: "
	}{
		{"trusted keys warn", []string{"check-config", "--policy.file=" + trusted, "--teams.file=" + teamsFile}, 0, []string{
			`warning: tier "prod" is chosen by pod_labels key "tier", which any user who can create or update pods in the pod's namespace can write`,
			`warning: tier "sweeps" is chosen by job_names, which the job's submitter (sbatch --job-name, scontrol update JobName=) can write`,
			`warning: pod_annotations key gpuwatch.io/exempt exempts a pod from every step (trusted in trust_workload_keys.annotations)`,
			`warning: ` + teamsFile + `:3: team.pod_label: the pod label "team" names the team of a pod whose namespace team.namespaces does not map`,
			`warning: tier "infra" matches teams, and the teams file takes a pod's team from its label "team"`,
		}, 5},
		{"untrusted key refused", []string{"check-config", "--policy.file=" + untrusted}, 2, []string{
			untrusted + `:4: tiers[0].match.labels.tier: pod_labels key "tier" is written by the workload`, `add "tier" to trust_workload_keys.labels`,
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, c.args...)
			cmd.Env = append(os.Environ(), asMain+"=1")
			var stderr bytes.Buffer
			cmd.Stderr, cmd.Stdout = &stderr, &bytes.Buffer{}
			_ = cmd.Run()
			out := stderr.String()
			if code := cmd.ProcessState.ExitCode(); code != c.code {
				t.Fatalf("exit %d, want %d:\n%s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "warning: "); n != c.count {
				t.Errorf("%d warnings, want %d:\n%s", n, c.count, out)
			}
		})
	}
}
