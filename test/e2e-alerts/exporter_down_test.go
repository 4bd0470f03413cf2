package e2ealerts

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// downTargets are the scrape jobs of TestExporterDownAnyJobName: the
// quickstart's plain name and the Prometheus Operator's namespace/monitor
// name with the target labels a PodMonitor adds. Neither is a name the rules
// know.
var downTargets = []struct {
	job, node    string
	targetLabels map[string]string
	honorLabels  bool
}{
	{job: "gpu", node: "a100-01", honorLabels: true},
	{job: "gpuwatch/gpuwatch-exporter", node: "a100-02",
		targetLabels: map[string]string{"namespace": "gpuwatch", "pod": "gpuwatch-exporter-x7k2p"}},
}

// TestExporterDownAnyJobName kills two exporters scraped under job names the
// rules do not know, waits for GPUExporterDown of each in Alertmanager's API,
// restarts them and waits for the alerts to resolve there.
func TestExporterDownAnyJobName(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end test; run test/e2e-alerts/run.sh")
	}
	promBin := testtool.Need(t, "prometheus")
	amBin := testtool.Need(t, "prometheus-alertmanager")
	root := repoRoot(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gpuwatch := testtool.Binary(t, "cmd/gpuwatch")

	addrs := make([]string, len(downTargets))
	exporterArgs := func(i int) []string {
		return []string{"exporter", "--source=sim", "--sim.node=" + downTargets[i].node,
			"--collect-interval=1s", "--web.listen-address=" + addrs[i]}
	}
	exporters := make([]*proc, len(downTargets))
	var scrapes []any
	for i, d := range downTargets {
		addrs[i] = testtool.FreeAddr(t)
		exporters[i] = start(ctx, t, dir, fmt.Sprintf("exporter-%d", i), gpuwatch, exporterArgs(i)...)
		target := map[string]any{"targets": []string{addrs[i]}}
		if d.targetLabels != nil {
			target["labels"] = d.targetLabels
		}
		sc := map[string]any{"job_name": d.job, "honor_labels": d.honorLabels, "static_configs": []any{target}}
		scrapes = append(scrapes, sc)
	}
	for _, a := range addrs {
		waitHTTP(ctx, t, "http://"+a+"/metrics")
	}

	promAddr, amAddr := testtool.FreeAddr(t), testtool.FreeAddr(t)
	amConfig := writeYAML(t, filepath.Join(dir, "alertmanager.yml"), map[string]any{
		"route":     map[string]any{"receiver": "null", "group_wait": "1s", "group_interval": "1s", "repeat_interval": "1h"},
		"receivers": []any{map[string]any{"name": "null"}},
	})
	start(ctx, t, dir, "alertmanager", amBin, "--config.file="+amConfig,
		"--storage.path="+filepath.Join(dir, "am-data"), "--web.listen-address="+amAddr,
		"--cluster.listen-address=")
	waitHTTP(ctx, t, "http://"+amAddr+"/-/ready")
	promConfig := writeYAML(t, filepath.Join(dir, "prometheus.yml"), map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     writeRuleFiles(t, root, dir),
		"alerting":       alertingTo(amAddr),
		"scrape_configs": scrapes,
	})
	start(ctx, t, dir, "prometheus", promBin, "--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address="+promAddr)
	waitHTTP(ctx, t, "http://"+promAddr+"/-/ready")
	prom := &promClient{base: "http://" + promAddr}
	am := "http://" + amAddr

	var want []string
	for _, d := range downTargets {
		want = append(want, d.job)
	}
	sort.Strings(want)

	// Both targets up and publishing, and no alert yet.
	waitFor(t, 60*time.Second, "both exporters up in Prometheus", func() (bool, string) {
		n, err := prom.series("up == 1", true)
		return err == nil && n == len(downTargets), fmt.Sprintf("%d targets up, %v", n, err)
	})
	// Let the rules evaluate a few times with the exporters up.
	time.Sleep(5 * time.Second)
	if got := exporterDownJobs(t, am); len(got) != 0 {
		t.Fatalf("GPUExporterDown active while every exporter is up: %v", got)
	}

	for _, e := range exporters {
		e.stop()
	}
	waitFor(t, 90*time.Second, "GPUExporterDown for every job in Alertmanager", func() (bool, string) {
		got := exporterDownJobs(t, am)
		return strings.Join(got, ",") == strings.Join(want, ","), fmt.Sprintf("active for jobs %v, want %v; firing in Prometheus: %s", got, want, prom.firing(t))
	})

	for i := range downTargets {
		exporters[i] = start(ctx, t, dir, fmt.Sprintf("exporter-%d", i), gpuwatch, exporterArgs(i)...)
	}
	waitFor(t, 90*time.Second, "GPUExporterDown resolved in Alertmanager", func() (bool, string) {
		got := exporterDownJobs(t, am)
		return len(got) == 0, fmt.Sprintf("still active for jobs %v", got)
	})
}

// exporterDownJobs lists the jobs of the active GPUExporterDown alerts in
// Alertmanager's API (resolved alerts are not listed).
func exporterDownJobs(t *testing.T, am string) []string {
	t.Helper()
	q := url.Values{"filter": {`alertname="GPUExporterDown"`}, "active": {"true"}}
	resp, err := http.Get(am + "/api/v2/alerts?" + q.Encode())
	if err != nil {
		t.Fatalf("query Alertmanager: %v", err)
	}
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&alerts); err != nil {
		t.Fatalf("decode Alertmanager alerts (HTTP %d): %v", resp.StatusCode, err)
	}
	var jobs []string
	for _, a := range alerts {
		jobs = append(jobs, a.Labels["job"])
	}
	sort.Strings(jobs)
	return jobs
}

// waitFor is testtool.Eventually whose condition explains itself: after
// timeout, the test fails with cond's last explanation.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var why string
	held := false
	defer func() {
		if !held {
			t.Logf("%s: last seen: %s", what, why)
		}
	}()
	testtool.Eventually(t, timeout, what, func() (bool, error) {
		var ok bool
		ok, why = cond()
		return ok, nil
	})
	held = true
}
