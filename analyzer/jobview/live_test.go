package jobview_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/attribution"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/server"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// slurmEnv returns the test cluster's slurm.conf and job-mapping folder
// (test/slurm/start.sh, which .ci/run starts). The Slurm commands read
// SLURM_CONF, which TestMain sets to it before any test runs (a test that
// set it could not run in parallel).
func slurmEnv(t *testing.T) (conf, mapDir string) {
	t.Helper()
	testtool.Need(t, "sbatch")
	conf = os.Getenv("GPUWATCH_SLURM_CONF")
	if conf == "" {
		testtool.Missing(t, "GPUWATCH_SLURM_CONF not set: run eval \"$(test/slurm/start.sh)\" first, as .ci/run does")
	}
	if got := os.Getenv("SLURM_CONF"); got != conf {
		t.Fatalf("SLURM_CONF is %q, GPUWATCH_SLURM_CONF %q: TestMain sets the one to the other", got, conf)
	}
	mapDir = os.Getenv("GPUWATCH_JOB_MAPPING_DIR")
	if mapDir == "" {
		mapDir = filepath.Join(filepath.Dir(filepath.Dir(conf)), "job-mapping")
	}
	return conf, mapDir
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// submit starts a real Slurm job holding two GPUs and returns its id and
// the GPU indexes Slurm gave it.
func submit(t *testing.T, name, script string) (string, []int) {
	t.Helper()
	id := strings.SplitN(run(t, "sbatch", "--parsable", "--gres=gpu:2", "-A", "physics", "-J", name, "-D", os.TempDir(), "-o", "/dev/null", "--wrap", script), ";", 2)[0]
	t.Cleanup(func() { _ = exec.Command("scancel", id).Run() })
	idx := regexp.MustCompile(`gpu[^ (]*\(IDX:([0-9,-]+)\)`)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out := run(t, "scontrol", "show", "job", "-d", id)
		if strings.Contains(out, "JobState=RUNNING") {
			if m := idx.FindStringSubmatch(out); m != nil {
				return id, expand(m[1])
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never ran:\n%s", id, out)
		}
	}
}

func expand(s string) []int {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if ok {
			b, _ = strconv.Atoi(hi)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out
}

// mappedOnly hides the simulator's own idea of who holds which GPU, so
// that the series are labelled by the job map the real prolog wrote.
type mappedOnly struct{ *sim.Source }

func (m mappedOnly) Collect(ctx context.Context) (*source.Snapshot, error) {
	s, err := m.Source.Collect(ctx)
	if s != nil {
		s.Allocations, s.Processes = nil, nil
	}
	return s, err
}

// startExporter serves the simulated node through the real collector and
// attribution chain reading mapDir; the GPUs listed train for the job
// (its CPU time comes from the simulator, as a cgroup would give it).
func startExporter(t *testing.T, job string, gpus []int, mapDir string) string {
	t.Helper()
	var list []string
	for _, g := range gpus {
		list = append(list, strconv.Itoa(g))
	}
	n := 8
	if v, err := strconv.Atoi(os.Getenv("GPUWATCH_SLURM_GPUS")); err == nil && v > 0 {
		n = v
	}
	sc, err := sim.ParseScenario("jobview", []byte(fmt.Sprintf(`
fleet: [{hostname: slurm-node, model: H100-SXM5-80GB, gpus: %d}]
workloads:
  - {id: %q, user: sim, node: slurm-node, gpus: [%s], start: -1m, duration: 2h, behaviour: bursty_training,
     params: {stall: 3s, stall_every: 10s, cpu_cores: 0.5}}
`, n, job, strings.Join(list, ","))))
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.New(sc, sim.Options{Seed: 7, Clock: source.SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := attribution.New(attribution.Options{JobMapDir: mapDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	col, err := collector.New(collector.Options{Source: mappedOnly{src}, Attributors: []source.Attributor{chain}, Interval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go col.Run(ctx)
	srv := httptest.NewServer(server.Handler(col, "test"))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startScraping runs a real Prometheus scraping target every second.
func startScraping(t *testing.T, target string) string {
	t.Helper()
	testtool.Need(t, "prometheus")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	host := strings.TrimPrefix(target, "http://")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: gpuwatch\n    static_configs: [{targets: [%q]}]\n", host)), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testtool.FreeAddr(t)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); logf.Close() })
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("prometheus not ready:\n%s", b)
		}
	}
}

// jobSamples reads the raw samples Prometheus holds of the job's GPUs
// (frame-buffer use, scraped with every other GPU figure): how many per
// GPU, and the first and last sample's time over all of them.
func jobSamples(c *promapi.Client, id string) (perGPU map[string]int, first, last time.Time, err error) {
	v, err := c.Query(context.Background(), schema.FBUsed.Name+`{hpc_job="`+id+`"}[10m]`, time.Now())
	if err != nil {
		return nil, first, last, err
	}
	perGPU = map[string]int{}
	for _, ss := range v.(model.Matrix) {
		perGPU[string(ss.Metric[schema.LabelUUID])] += len(ss.Values)
		for _, p := range ss.Values {
			if ts := p.Timestamp.Time(); first.IsZero() || ts.Before(first) {
				first = ts
			}
			if ts := p.Timestamp.Time(); ts.After(last) {
				last = ts
			}
		}
	}
	return perGPU, first, last, nil
}

// awaitJobData waits until Prometheus holds at least n samples of the job
// on each of its gpus GPUs, spanning at least span: the telemetry a view
// or a summary of the running job needs (at least 3 samples a GPU), in
// place of a fixed wait.
func awaitJobData(t *testing.T, prom, id string, gpus, n int, span time.Duration) {
	t.Helper()
	c, err := promapi.New(prom, promapi.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	testtool.Eventually(t, 2*time.Minute, fmt.Sprintf("%d samples over %s of job %s on each of its %d GPUs in Prometheus", n, span, id, gpus), func() (bool, error) {
		perGPU, first, last, err := jobSamples(c, id)
		if err != nil || len(perGPU) != gpus || last.Sub(first) < span {
			return false, err
		}
		for _, k := range perGPU {
			if k < n {
				return false, nil
			}
		}
		return true, nil
	})
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) }

func scalar(t *testing.T, c *promapi.Client, expr string, at time.Time) (float64, bool) {
	t.Helper()
	v, err := c.Query(context.Background(), expr, at)
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	vec := v.(model.Vector)
	if len(vec) == 0 {
		return 0, false
	}
	if len(vec) > 1 {
		t.Fatalf("%s: %d series, want one", expr, len(vec))
	}
	return float64(vec[0].Value), true
}
