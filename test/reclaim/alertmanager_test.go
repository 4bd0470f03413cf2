package reclaim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// startAlertmanager runs a private Alertmanager on loopback and returns its URL.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	bin := lookPath("prometheus-alertmanager", "alertmanager")
	if bin == "" {
		need(t, "alertmanager not installed; .ci/run installs it (Debian prometheus-alertmanager)")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: hold\nreceivers:\n  - name: hold\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", testtool.FreePort(t))
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+strings.TrimPrefix(url, "http://"), "--cluster.listen-address=", "--log.level=warn")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("alertmanager not ready: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type gettableAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Status      struct {
		State string `json:"state"`
	} `json:"status"`
}

func TestAlertmanagerReceivesWarnings(t *testing.T) {
	t.Parallel()
	url := startAlertmanager(t)
	doc := fmt.Sprintf(`
dry_run: true
channels:
  alertmanager: {url: %q, alert_duration: 2h}
tiers:
  - name: dev
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s}, {action: reclaim, after: 1h}]
      - pattern: stuck
        steps: [{action: warn, after: 10m}]
exemptions: [{user: carol}]
`, url)
	pol, err := policy.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg, err := audit.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	// Slurm's answers for these jobs (this test is about the delivery).
	owners := &facts.Table{Name: schema.SchedulerSlurm, Jobs: map[string]*facts.Facts{
		"501": facts.SlurmJob("debug", "", "", "bob", "a"), "502": facts.SlurmJob("debug", "", "", "dave", "b"),
		"503": facts.SlurmJob("debug", "", "", "erin", "c"), "504": facts.SlurmJob("debug", "", "", "carol", "d")}}
	now := time.Now().UTC()
	for _, fa := range owners.Jobs {
		// On the findings' node since before their evidence: the targets are proven.
		fa.Identity = facts.Identity{Nodes: []string{"node1"}, Since: now.Add(-3 * time.Hour)}
	}
	e := &daemon.Escalator{Policy: pol, Log: lg, Actuators: map[string]action.Actuator{
		"alertmanager": &action.Alertmanager{URL: pol.Channels.AlertmanagerURL, Duration: pol.Channels.AlertDuration}},
		Facts: &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: owners}}}
	mk := func(job, user, team string, p schema.Pattern) finding.Finding {
		f := idleFinding(job, now)
		f.User, f.Team, f.Pattern = user, team, p
		return f
	}
	fs := []finding.Finding{
		mk("501", "bob", "vision", schema.CPUOnly),
		mk("502", "dave", "nlp", schema.CPUOnly),
		mk("503", "erin", "nlp", schema.Stuck),    // warn due only after 10m
		mk("504", "carol", "nlp", schema.CPUOnly), // exempt
	}
	if _, err := e.Cycle(context.Background(), now, fs); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url + "/api/v2/alerts?filter=" + `alertname="` + action.AlertName + `"`)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var alerts []gettableAlert
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		t.Fatal(err)
	}
	got := map[string]gettableAlert{}
	for _, a := range alerts {
		got[a.Labels["job"]] = a
	}
	if len(got) != 2 {
		t.Fatalf("alertmanager holds alerts for %d jobs, want 2 (501, 502): %+v", len(got), alerts)
	}
	for job, want := range map[string][3]string{"501": {"bob", "vision", "cpu_only"}, "502": {"dave", "nlp", "cpu_only"}} {
		a := got[job]
		if a.Labels["user"] != want[0] || a.Labels["team"] != want[1] || a.Labels["pattern"] != want[2] ||
			a.Labels["severity"] != "warning" || a.Status.State != "active" {
			t.Errorf("alert for job %s = %+v", job, a)
		}
		if !strings.Contains(a.Annotations["description"], "Next step: reclaim") {
			t.Errorf("alert for job %s lacks the next step: %q", job, a.Annotations["description"])
		}
	}
}
