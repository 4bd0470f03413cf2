package e2ealerts

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/promqltest"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/rules"
	"github.com/gpuwatch/gpuwatch/schema"
)

const (
	scenario = "exporter/sim/scenarios/throttling-xid.yaml"
	host     = "gpu-node-01" // the scenario's only node
	// dcgmHost and dcgmInstance label a second scrape of the same exporter
	// with every gpuwatch_* series dropped and the node in Hostname: what a
	// stock dcgm-exporter 3.x serves.
	dcgmHost     = "dcgm-node"
	dcgmInstance = "dcgm-node:9400"
	// shortFor replaces every alert's `for:` so the test finishes in minutes;
	// the promtool unit tests cover the real durations.
	shortFor = "5s"
	// faultTimeScale divides the times of the scenario's faults (writeScenario):
	// its faults start from 30s on, so that a Prometheus started after the
	// exporter still sees every GPU healthy first. The test starts
	// Prometheus first, so a third of that leaves it ten scrapes of each GPU
	// before the first fault, and the last fault starts at 33s, not 100s.
	faultTimeScale = 3
	// alertDeadline bounds the wait for every expected notification: the
	// scenario's last fault starts at 33s (its 100s divided as above).
	alertDeadline = 150 * time.Second
)

// expected are the notifications the scenario must produce: alert, GPU, the
// team label (empty: none) and every receiver that must get it.
var expected = []struct {
	host, alert, gpu, team string
	receivers              []string
}{
	{host, "GPUHardwareSlowdown", "0", "llm", []string{"gpu-ops-pager", "team-llm"}},
	{host, "GPUPowerThrottling", "1", "llm", []string{"team-llm"}},
	{host, "GPUXidCritical", "2", "llm", []string{"gpu-ops-pager", "team-llm"}},
	{host, "GPUXidApplicationError", "3", "llm", []string{"team-llm"}},
	{host, "GPUECCDoubleBitErrors", "4", "vision", []string{"gpu-ops-pager", "team-vision"}},
	{host, "GPURowRemapFailure", "5", "vision", []string{"gpu-ops-pager", "team-vision"}},
	{host, "GPUNVLinkErrors", "6", "nlp", []string{"gpu-ops"}},
	{host, "GPUPCIeReplayErrors", "6", "nlp", []string{"gpu-ops"}},
	{host, "GPUDown", "7", "", []string{"gpu-ops-pager"}},
	// The same faults seen through dcgm-exporter's names only: no team (no
	// gpuwatch_allocation_info), no XID counter, and a lost GPU is an absent
	// series rather than gpuwatch_gpu_up 0.
	{dcgmHost, "GPUHardwareSlowdown", "0", "", []string{"gpu-ops-pager"}},
	{dcgmHost, "GPUPowerThrottling", "1", "", []string{"gpu-ops"}},
	{dcgmHost, "GPUECCDoubleBitErrors", "4", "", []string{"gpu-ops-pager"}},
	{dcgmHost, "GPURowRemapFailure", "5", "", []string{"gpu-ops-pager"}},
	{dcgmHost, "GPUNVLinkErrors", "6", "", []string{"gpu-ops"}},
	{dcgmHost, "GPUMissing", "7", "", []string{"gpu-ops-pager"}},
}

// inhibited fire in Prometheus but a critical alert on the same GPU must keep
// them from any receiver.
var inhibited = []struct{ alert, gpu string }{
	{"GPUThermalThrottling", "0"}, // by GPUHardwareSlowdown
	{"GPURowRemapPending", "4"},   // by GPUECCDoubleBitErrors
}

func TestAlertsEndToEnd(t *testing.T) {
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

	hook := newWebhook()
	srv := httptest.NewServer(hook)
	defer srv.Close()

	exporterAddr, promAddr, amAddr := testtool.FreeAddr(t), testtool.FreeAddr(t), testtool.FreeAddr(t)

	amConfig := writeAlertmanagerConfig(t, root, dir, srv.URL)
	start(ctx, t, dir, "alertmanager", amBin, "--config.file="+amConfig,
		"--storage.path="+filepath.Join(dir, "am-data"), "--web.listen-address="+amAddr,
		"--cluster.listen-address=")
	waitHTTP(ctx, t, "http://"+amAddr+"/-/ready")

	promConfig := writePrometheusConfig(t, root, dir, exporterAddr, amAddr)
	start(ctx, t, dir, "prometheus", promBin, "--config.file="+promConfig,
		"--storage.tsdb.path="+filepath.Join(dir, "prom-data"), "--web.listen-address="+promAddr)
	waitHTTP(ctx, t, "http://"+promAddr+"/-/ready")
	prom := &promClient{base: "http://" + promAddr}
	// The exporter last: the scenario's time starts with it, and Prometheus
	// scrapes it from its first second.
	start(ctx, t, dir, "exporter", gpuwatch, "exporter", "--source=sim",
		"--sim.scenario="+writeScenario(t, root, dir), "--collect-interval=1s",
		"--web.listen-address="+exporterAddr)
	waitHTTP(ctx, t, "http://"+exporterAddr+"/metrics")

	t.Run("alerts reach the webhook with hostname, gpu and team", func(t *testing.T) {
		waitFor(t, alertDeadline, "every expected notification", func() (bool, string) {
			missing := missingNotifications(hook)
			return len(missing) == 0, fmt.Sprintf("still missing: %s\nreceived: %s\nfiring in Prometheus: %s",
				strings.Join(missing, "; "), hook.summary(), prom.firing(t))
		})
		for _, e := range expected {
			for _, a := range hook.find(e.host, e.alert, e.gpu) {
				if a.Labels[schema.LabelTeam] != e.team {
					t.Errorf("%s gpu %s: team %q, want %q", e.alert, e.gpu, a.Labels[schema.LabelTeam], e.team)
				}
				for _, k := range []string{"summary", "description", "runbook_url"} {
					if a.Annotations[k] == "" {
						t.Errorf("%s gpu %s: no %s annotation", e.alert, e.gpu, k)
					}
				}
			}
		}
	})

	t.Run("critical inhibits warning on the same GPU", func(t *testing.T) {
		firing := prom.firing(t)
		for _, in := range inhibited {
			if !strings.Contains(firing, in.alert+"/"+in.gpu+"@"+host) {
				t.Errorf("%s on GPU %s does not fire in Prometheus, so its inhibition is not tested; firing: %s", in.alert, in.gpu, firing)
			}
			if got := hook.find(host, in.alert, in.gpu); len(got) > 0 {
				t.Errorf("%s on GPU %s reached %s although a critical alert on that GPU should inhibit it", in.alert, in.gpu, got[0].receiver)
			}
		}
	})

	t.Run("recording rules return data", func(t *testing.T) {
		recorded, err := rules.Recorded()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range recorded {
			// The scenario has no idle allocated GPU and no analyzer runs here.
			if strings.Contains(name, "idle") || strings.Contains(name, "analyzer") {
				continue
			}
			// The planner's hourly figures are evaluated once an hour, after
			// the hour: a run of minutes has none (analyzer/plan backfills
			// them in TestRecordedMatchesRaw).
			if isPlannerRule(name) {
				continue
			}
			if n, err := prom.series(name, true); err != nil || n == 0 {
				t.Errorf("recording rule %s: %d series, %v", name, n, err)
			}
		}
	})

	t.Run("every dashboard query returns data", func(t *testing.T) {
		walkDashboards(t, root, prom)
	})

	t.Run("cost per team uses each model's price", func(t *testing.T) {
		checkCost(t, prom)
	})

	t.Run("NVIDIA dashboard 12239 queries return data", func(t *testing.T) {
		walk12239(t, prom)
	})
}

// ---- processes ----

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// proc is a process the test started.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// stop interrupts the process and waits for it, killing it after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// start runs a process with its output in dir/<name>.log, and stops it when
// the test ends; the log is printed if the test failed.
func start(ctx context.Context, t *testing.T, dir, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		logFile.Close()
		if t.Failed() {
			if data, err := os.ReadFile(logPath); err == nil {
				t.Logf("---- %s log (last 4 KiB) ----\n%s", name, tail(data, 4096))
			}
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func waitHTTP(ctx context.Context, t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s (last error %v)", u, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ---- configuration ----

// writeScenario writes the scenario into dir with the time of each fault
// (at, every) divided by faultTimeScale, to the second, and returns its path.
func writeScenario(t *testing.T, root, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, scenario))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse %s: %v", scenario, err)
	}
	faults := mappingValue(doc.Content[0], "faults")
	if faults == nil || faults.Kind != yaml.SequenceNode || len(faults.Content) == 0 {
		t.Fatalf("%s has no faults", scenario)
	}
	for _, f := range faults.Content {
		for _, key := range []string{"at", "every"} {
			v := mappingValue(f, key)
			if v == nil {
				continue
			}
			d, err := configfile.ParseDuration(v.Value)
			if err != nil {
				t.Fatalf("%s: fault %s: %v", scenario, key, err)
			}
			v.Value = configfile.FormatDuration((d / faultTimeScale).Round(time.Second))
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(scenario))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// mappingValue is the value of key in a YAML mapping node, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// writeAlertmanagerConfig adapts the shipped example: every receiver posts to
// the test's webhook under its own name, and the timers shrink to seconds.
func writeAlertmanagerConfig(t *testing.T, root, dir, hookURL string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "rules", rules.AlertmanagerFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("parse %s: %v", rules.AlertmanagerFile, err)
	}
	route, ok := cfg["route"].(map[string]any)
	if !ok {
		t.Fatal("example config has no route")
	}
	route["group_wait"], route["group_interval"], route["repeat_interval"] = "1s", "1s", "1m"
	receivers, ok := cfg["receivers"].([]any)
	if !ok || len(receivers) == 0 {
		t.Fatal("example config has no receivers")
	}
	for _, r := range receivers {
		rm := r.(map[string]any)
		name := rm["name"].(string)
		hooks, ok := rm["webhook_configs"].([]any)
		if !ok {
			t.Fatalf("receiver %s has no webhook_configs", name)
		}
		for _, h := range hooks {
			h.(map[string]any)["url"] = hookURL + "/" + name
		}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writePrometheusConfig writes a private Prometheus config scraping the
// exporter every second and loading the shipped rules (see writeRuleFiles).
func writePrometheusConfig(t *testing.T, root, dir, exporterAddr, amAddr string) string {
	t.Helper()
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files": writeRuleFiles(t, root, dir),
		"alerting":   alertingTo(amAddr),
		"scrape_configs": []any{
			map[string]any{"job_name": "gpuwatch", "static_configs": []any{map[string]any{"targets": []string{exporterAddr}}}},
			// The same exporter as a stock dcgm-exporter would look: another
			// instance and host, and no gpuwatch_* series.
			map[string]any{"job_name": "dcgm-exporter",
				"static_configs":  []any{map[string]any{"targets": []string{exporterAddr}}},
				"relabel_configs": []any{map[string]any{"target_label": "instance", "replacement": dcgmInstance}},
				"metric_relabel_configs": []any{
					map[string]any{"source_labels": []string{"__name__"}, "regex": "gpuwatch_.*", "action": "drop"},
					// dcgm-exporter 3.x names the node label Hostname.
					map[string]any{"source_labels": []string{schema.LabelHostname}, "regex": ".+", "target_label": schema.LabelOldHost, "replacement": dcgmHost},
					map[string]any{"regex": schema.LabelHostname, "action": "labeldrop"},
				},
			},
		},
	}
	return writeYAML(t, filepath.Join(dir, "prometheus.yml"), cfg)
}

func alertingTo(amAddr string) map[string]any {
	return map[string]any{"alertmanagers": []any{
		map[string]any{"static_configs": []any{map[string]any{"targets": []string{amAddr}}}},
	}}
}

func writeYAML(t *testing.T, path string, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeRuleFiles writes the shipped rule files into dir with every `for:`
// shortened and every group evaluated every second, and returns their paths.
func writeRuleFiles(t *testing.T, root, dir string) []string {
	t.Helper()
	var ruleFiles []string
	for _, name := range []string{rules.RecordingFile, rules.AlertsFile} {
		data, err := os.ReadFile(filepath.Join(root, "rules", name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := rules.Parse(name, data)
		if err != nil {
			t.Fatal(err)
		}
		for gi := range f.Groups {
			g := &f.Groups[gi]
			if g.Interval != "" {
				g.Interval = "1s"
			}
			for ri := range g.Rules {
				if g.Rules[ri].For != "" {
					g.Rules[ri].For = shortFor
				}
			}
		}
		out, err := yaml.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, p)
	}
	return ruleFiles
}

// ---- webhook receiver ----

type receivedAlert struct {
	receiver    string
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// webhook records Alertmanager's notifications; the receiver is the last
// element of the path (see writeAlertmanagerConfig).
type webhook struct {
	mu     sync.Mutex
	alerts []receivedAlert
}

func newWebhook() *webhook { return &webhook{} }

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Receiver string          `json:"receiver"`
		Alerts   []receivedAlert `json:"alerts"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	receiver := strings.TrimPrefix(r.URL.Path, "/")
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range msg.Alerts {
		if a.Status != "firing" {
			continue
		}
		a.receiver = receiver
		if msg.Receiver != receiver { // the path and the payload must agree
			a.receiver = receiver + "!=" + msg.Receiver
		}
		h.alerts = append(h.alerts, a)
	}
}

// find returns the notifications of alert for one GPU of one host.
func (h *webhook) find(hostname, alert, gpu string) []receivedAlert {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []receivedAlert
	for _, a := range h.alerts {
		if a.Labels["alertname"] == alert && a.Labels[schema.LabelGPU] == gpu && hostOf(a.Labels) == hostname {
			out = append(out, a)
		}
	}
	return out
}

// hostOf is the node of an alert: hostname, or Hostname on dcgm-exporter
// 3.x's data.
func hostOf(labels map[string]string) string {
	if h := labels[schema.LabelHostname]; h != "" {
		return h
	}
	return labels[schema.LabelOldHost]
}

func (h *webhook) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range h.alerts {
		seen[fmt.Sprintf("%s:%s/%s(team=%s)->%s", hostOf(a.Labels), a.Labels["alertname"], a.Labels[schema.LabelGPU], a.Labels[schema.LabelTeam], a.receiver)] = true
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func missingNotifications(h *webhook) []string {
	var missing []string
	for _, e := range expected {
		got := map[string]bool{}
		for _, a := range h.find(e.host, e.alert, e.gpu) {
			got[a.receiver] = true
		}
		for _, r := range e.receivers {
			if !got[r] {
				missing = append(missing, fmt.Sprintf("%s %s gpu %s at %s", e.host, e.alert, e.gpu, r))
			}
		}
	}
	return missing
}

// ---- Prometheus queries ----

type promClient struct{ base string }

type promResult struct {
	Status string          `json:"status"`
	Error  string          `json:"error"`
	Data   json.RawMessage `json:"data"`
}

// vector is the data of a query or query_range answer.
type vector struct {
	ResultType string            `json:"resultType"`
	Result     []json.RawMessage `json:"result"`
}

func (r *promResult) result() ([]json.RawMessage, error) {
	var v vector
	if err := json.Unmarshal(r.Data, &v); err != nil {
		return nil, fmt.Errorf("decode Prometheus result: %w", err)
	}
	return v.Result, nil
}

func (p *promClient) get(path string, params url.Values) (*promResult, error) {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, fmt.Errorf("query Prometheus: %w", err)
	}
	defer resp.Body.Close()
	var r promResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decode Prometheus answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("Prometheus: %s", r.Error)
	}
	return &r, nil
}

// series counts the series an expression returns, as an instant query or as
// a range query over the last minute.
func (p *promClient) series(expr string, instant bool) (int, error) {
	now := time.Now()
	if instant {
		r, err := p.get("/api/v1/query", url.Values{"query": {expr}, "time": {fmt.Sprint(now.Unix())}})
		if err != nil {
			return 0, err
		}
		res, err := r.result()
		return len(res), err
	}
	r, err := p.get("/api/v1/query_range", url.Values{"query": {expr},
		"start": {fmt.Sprint(now.Add(-time.Minute).Unix())}, "end": {fmt.Sprint(now.Unix())}, "step": {"5"}})
	if err != nil {
		return 0, err
	}
	res, err := r.result()
	return len(res), err
}

// firing lists alerts firing in Prometheus as alertname/gpu.
func (p *promClient) firing(t *testing.T) string {
	r, err := p.get("/api/v1/query", url.Values{"query": {`ALERTS{alertstate="firing"}`}})
	if err != nil {
		return err.Error()
	}
	res, err := r.result()
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, raw := range res {
		var s struct {
			Metric map[string]string `json:"metric"`
		}
		if json.Unmarshal(raw, &s) == nil {
			out = append(out, s.Metric["alertname"]+"/"+s.Metric[schema.LabelGPU]+"@"+hostOf(s.Metric))
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// ---- dashboard walks ----

// fill replaces Grafana's variables: the node under test for $hostname and
// $instance, every value (".*") for the multi-value ones, and short windows
// for the interval macros (the test has a few minutes of data).
func fill(expr string, vars map[string]string) string {
	r := strings.NewReplacer("$__rate_interval", "30s", "$__range_s", "120", "$__range", "2m", "$__interval", "5s")
	expr = r.Replace(expr)
	// Longest names first, so $job never eats into $job_id-like names.
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, k := range names {
		expr = strings.ReplaceAll(expr, "${"+k+"}", vars[k])
		expr = strings.ReplaceAll(expr, "$"+k, vars[k])
	}
	return expr
}

// analyzerOnly reports whether a query reads only analyzer metrics, which
// this test cannot produce (no analyzer runs here).
// perHolderOnly says whether expr reads a shared GPU's per-holder series.
func perHolderOnly(expr string) bool {
	names, err := promqltest.MetricNames(expr)
	if err != nil {
		return false
	}
	for _, n := range names {
		for _, m := range schema.HolderUseMetrics {
			if m.Name == n {
				return true
			}
		}
	}
	return false
}

func analyzerOnly(expr string) bool {
	names, err := promqltest.MetricNames(expr)
	if err != nil || len(names) == 0 {
		return false
	}
	for _, n := range names {
		m, ok := schema.Lookup(n)
		if !ok || m.Origin != schema.OriginAnalyzer {
			return false
		}
	}
	return true
}

// dcgmOnly reports whether a query reads only dcgm-exporter's metrics.
func dcgmOnly(expr string) bool {
	names, err := promqltest.MetricNames(expr)
	if err != nil || len(names) == 0 {
		return false
	}
	for _, n := range names {
		m, ok := schema.Lookup(n)
		if !ok || !m.DCGM {
			return false
		}
	}
	return true
}

// walkDashboards runs every query with the gpuwatch node selected, then every
// hardware query (dcgm-exporter metrics only) with the stock-dcgm node.
func walkDashboards(t *testing.T, root string, prom *promClient) {
	if hosts := variableValues(t, root, prom, "hostname", nil); strings.Join(hosts, ",") != dcgmHost+","+host {
		t.Fatalf("the hostname variable lists %v; want %s (Hostname) and %s (hostname)", hosts, dcgmHost, host)
	}
	if gpus := variableValues(t, root, prom, "gpu", map[string]string{"hostname": dcgmHost}); len(gpus) != 7 {
		t.Errorf("the gpu variable lists %v on %s (Hostname); want its 7 GPUs left on the bus", gpus, dcgmHost)
	}
	vars := map[string]string{"hostname": host, "gpu": ".*", "team": ".*", "job": ".*", "price": "1"}
	dcgmVars := map[string]string{"hostname": dcgmHost, "gpu": ".*", "team": ".*", "job": ".*", "price": "1"}
	hardware := 0
	files, err := filepath.Glob(filepath.Join(root, "dashboards", "generated", "*.json"))
	if err != nil || len(files) != len(dashboards.All()) {
		t.Fatalf("generated dashboards: %d files, want %d (%v)", len(files), len(dashboards.All()), err)
	}
	total, skipped, holderOnly := 0, 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		qs, err := dashboards.Queries(data)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if analyzerOnly(q.Expr) {
				skipped++
				continue
			}
			if perHolderOnly(q.Expr) {
				// The simulator publishes each holder's own use on
				// shared GPUs only, and this node shares none
				// (exporter/sim's shared-timeslice scenario does).
				holderOnly++
				continue
			}
			total++
			expr := fill(q.Expr, vars)
			n, err := prom.series(expr, q.Instant)
			switch {
			case err != nil:
				t.Errorf("%s / %s %s: %v\n  %s", q.Dashboard, q.Panel, q.RefID, err, expr)
			case n == 0:
				t.Errorf("%s / %s %s: no data\n  %s", q.Dashboard, q.Panel, q.RefID, expr)
			}
			if !dcgmOnly(q.Expr) {
				continue
			}
			hardware++
			expr = fill(q.Expr, dcgmVars)
			if n, err := prom.series(expr, q.Instant); err != nil || n == 0 {
				t.Errorf("%s / %s %s on dcgm-exporter data: %d series, %v\n  %s", q.Dashboard, q.Panel, q.RefID, n, err, expr)
			}
		}
	}
	if hardware < 20 {
		t.Errorf("only %d hardware queries ran on dcgm-exporter data", hardware)
	}
	t.Logf("%d dashboard queries returned data, %d of them also on dcgm-exporter data; %d analyzer-only queries skipped (no analyzer in this test), "+
		"%d per-holder queries skipped (no shared GPU on this node)", total, hardware, skipped, holderOnly)
}

// variableValues evaluates a query_result variable of the fleet dashboard
// the way Grafana does: an instant query, then the variable's regex on each
// result line.
func variableValues(t *testing.T, root string, prom *promClient, name string, vars map[string]string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "dashboards", "generated", "gpuwatch-fleet.json"))
	if err != nil {
		t.Fatal(err)
	}
	vs, err := dashboards.Variables(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if v.Name != name {
			continue
		}
		inner, ok := strings.CutPrefix(v.Query, "query_result(")
		if !ok {
			t.Fatalf("variable %s is not a query_result variable: %q", name, v.Query)
		}
		re, err := regexp.Compile(strings.Trim(v.Regex, "/"))
		if err != nil {
			t.Fatalf("variable %s regex %q: %v", name, v.Regex, err)
		}
		r, err := prom.get("/api/v1/query", url.Values{"query": {fill(strings.TrimSuffix(inner, ")"), vars)}})
		if err != nil {
			t.Fatalf("variable %s: %v", name, err)
		}
		res, err := r.result()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, raw := range res {
			var s struct {
				Metric map[string]string `json:"metric"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			// Grafana matches the regex against the series as text.
			var parts []string
			for k, v := range s.Metric {
				parts = append(parts, fmt.Sprintf("%s=%q", k, v))
			}
			if m := re.FindStringSubmatch("{" + strings.Join(parts, ", ") + "}"); m != nil {
				out = append(out, m[1])
			}
		}
		sort.Strings(out)
		return out
	}
	t.Fatalf("no variable %s", name)
	return nil
}

func walk12239(t *testing.T, prom *promClient) {
	// NVIDIA's dashboard runs against the stock-dcgm view of the exporter.
	instances := []string{dcgmInstance}
	f, err := os.Open("dcgm-12239-queries.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{"instance": instances[0], "gpu": ".*"}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		panel, expr, ok := strings.Cut(line, "|")
		if !ok {
			t.Fatalf("bad fixture line %q", line)
		}
		n++
		expr = fill(strings.TrimSpace(expr), vars)
		got, err := prom.series(expr, false)
		switch {
		case err != nil:
			t.Errorf("12239 %s: %v\n  %s", strings.TrimSpace(panel), err, expr)
		case got == 0:
			t.Errorf("12239 %s: no data\n  %s", strings.TrimSpace(panel), expr)
		}
	}
	if n < 6 {
		t.Fatalf("only %d 12239 queries in the fixture", n)
	}
}

// checkCost renders the team dashboard with a price for the scenario's H100s
// and evaluates its cost query: each team pays its held GPUs times 4.
func checkCost(t *testing.T, prom *promClient) {
	files, err := dashboards.RenderWith(dashboards.Options{DefaultPrice: 1, Prices: map[string]float64{"H100": 4}})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := dashboards.Queries(files["gpuwatch-team.json"])
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if q.Panel != "Cost per hour by team" {
			continue
		}
		expr := fill(q.Expr, map[string]string{"team": ".*", "price": "1", "price_1": "4"})
		r, err := prom.get("/api/v1/query", url.Values{"query": {expr}})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.result()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, raw := range res {
			var s struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			}
			if err := json.Unmarshal(raw, &s); err != nil || len(s.Value) != 2 {
				t.Fatalf("decode %s: %v", raw, err)
			}
			got[s.Metric[schema.LabelTeam]] = fmt.Sprint(s.Value[1])
		}
		// The scenario's jobs: llm holds 4 H100s, vision 2, nlp 1.
		want := map[string]string{"llm": "16", "vision": "8", "nlp": "4"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("cost per hour by team %v, want %v\n  %s", got, want, expr)
		}
		return
	}
	t.Fatal("no cost panel on the team dashboard")
}

func isPlannerRule(name string) bool {
	for f := hourly.Figure(0); f < hourly.Figures; f++ {
		if hourly.Record(f) == name {
			return true
		}
	}
	return false
}
