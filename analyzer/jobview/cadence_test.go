package jobview_test

import (
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// cadenceFleet: one node's target scraped every 15 s, the other's every
// 60 s, in one store; jobs short and long, and one whose GPU falls off the
// bus for 70 of its 120 minutes.
const cadenceFleet = `
name: cadence
fleet: [{hostnames: [node-15, node-60], model: H100-SXM5-80GB, gpus: 4}]
workloads:
  - {id: "801", user: ann, team: nlp, node: node-15, gpus: [0], start: 10m, duration: 3m, behaviour: training}
  - {id: "802", user: ann, team: nlp, node: node-15, gpus: [1, 3], start: 10m, duration: 2h, behaviour: training}
  - {id: "803", user: bob, team: nlp, node: node-60, gpus: [0], start: 10m, duration: 2h, behaviour: training}
  - {id: "804", user: bob, team: nlp, node: node-15, gpus: [2], start: 10m, duration: 2h, behaviour: training}
faults:
  - {kind: gpu_lost, node: node-15, gpus: [2], at: 40m, duration: 70m}
`

// cadenceStore replays three hours into an embedded store, node-60 thinned
// to 60 s, and writes the same data as OpenMetrics for a real Prometheus.
func cadenceStore(t *testing.T) (*embedded.DB, string) {
	t.Helper()
	sc, err := sim.ParseScenario("cadence", []byte(cadenceFleet))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := simload.Format{HostIntervals: map[string]time.Duration{"node-15": 15 * time.Second, "node-60": time.Minute}}
	app, om := db.Appender(), simload.NewOpenMetrics(dir)
	toDB := f.Sink(func(ts time.Time, fams []*dto.MetricFamily) error {
		return app.AppendFamilies(context.Background(), ts, fams)
	})
	toOM := f.Sink(om.Sink)
	if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: 5, Origin: origin, To: 3 * time.Hour, Resolution: 15 * time.Second},
		func(ts time.Time, fams []*dto.MetricFamily) error {
			if err := toDB(ts, fams); err != nil {
				return err
			}
			return toOM(ts, fams)
		}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cadence.om")
	if err := om.Close(file); err != nil {
		t.Fatal(err)
	}
	return db, file
}

// promFrom backfills an OpenMetrics file into a real Prometheus.
func promFrom(t *testing.T, file string) string {
	t.Helper()
	testtool.Need(t, "promtool")
	testtool.Need(t, "prometheus")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command("promtool", "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=256h", file, data).CombinedOutput(); err != nil {
		t.Fatalf("promtool: %v\n%s", err, out)
	}
	addr := testtool.FreeAddr(t)
	cmd := exec.Command("prometheus", "--config.file=/dev/null", "--storage.tsdb.path="+data, "--storage.tsdb.retention.time=100y", "--web.listen-address="+addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus not ready")
		}
	}
}

// TestCoverageByOwnCadence: a job scraped every 15 s without a gap is
// fully covered, short or long; so is one on a target scraped every 60 s
// beside it; a job whose GPU was gone for 70 of 120 minutes is not enough
// data. Through the embedded store and a real Prometheus.
func TestCoverageByOwnCadence(t *testing.T) {
	t.Parallel()
	db, file := cadenceStore(t)
	check := func(t *testing.T, q query.Querier) {
		for _, c := range []struct {
			job      string
			min, max float64
			enough   bool
		}{
			{"801", 0.99, 1, true},
			{"802", 0.99, 1, true},
			{"803", 0.99, 1, true},
			{"804", 0.3, 0.5, false},
		} {
			ref, _ := jobview.ParseRef(c.job)
			r, err := jobview.Build(context.Background(), jobview.Options{Querier: q, Now: origin.Add(3 * time.Hour), Lookback: 6 * time.Hour}, ref)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("job %s: %.0f min, %d samples on its first GPU, coverage %.3f %s", c.job, r.DurationHours*60, r.GPUs[0].Samples, r.Coverage, r.NotEnoughData)
			if r.Coverage < c.min || r.Coverage > c.max {
				t.Errorf("job %s: coverage %.3f, want %.2f to %.2f", c.job, r.Coverage, c.min, c.max)
			}
			if enough := r.NotEnoughData == ""; enough != c.enough || (!enough && !strings.Contains(r.NotEnoughData, "cover only")) {
				t.Errorf("job %s: not enough data %q", c.job, r.NotEnoughData)
			}
		}
	}
	t.Run("embedded", func(t *testing.T) { check(t, db) })
	t.Run("prometheus", func(t *testing.T) {
		c, err := promapi.New(promFrom(t, file), promapi.Options{Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		check(t, c)
	})
}

// honorFleet: two notebook pods and a training pod on one node, scraped
// with honor_labels: false, so each GPU series carries the exporter's own
// pod and namespace and the workload's as exported_pod and
// exported_namespace.
const honorFleet = `
name: honor
fleet: [{hostname: node-h, model: A100-SXM4-80GB, gpus: 4}]
workloads:
  - {id: train-0, scheduler: kubernetes, namespace: ml, user: ann, team: ml, node: node-h, gpus: [0, 1], start: 10m, duration: 2h, behaviour: training}
  - {id: jupyter-bob, scheduler: kubernetes, namespace: jhub, user: bob, team: ml, node: node-h, gpus: [2], start: 10m, duration: 2h, behaviour: idle_notebook}
`

// TestJobUnderExportedLabels: `gpuwatch job ns/pod` finds a pod whose
// series name it only in exported_namespace and exported_pod (Prometheus'
// honor_labels: false), reports it fully covered, and finds its waste; the
// exporter's own pod, which the series' pod label names, is no job.
func TestJobUnderExportedLabels(t *testing.T) {
	t.Parallel()
	sc, err := sim.ParseScenario("honor", []byte(honorFleet))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := simload.Format{HonorLabelsFalse: true}
	app := db.Appender()
	if _, err := simload.Replay(context.Background(), sc, simload.Options{Seed: 5, Origin: origin, To: 3 * time.Hour, Resolution: 15 * time.Second},
		f.Sink(func(ts time.Time, fams []*dto.MetricFamily) error {
			return app.AppendFamilies(context.Background(), ts, fams)
		})); err != nil {
		t.Fatal(err)
	}
	o := jobview.Options{Querier: db, Now: origin.Add(3 * time.Hour), Lookback: 6 * time.Hour}
	for _, c := range []struct {
		job     string
		gpus    int
		pattern string
	}{{"ml/train-0", 2, ""}, {"jhub/jupyter-bob", 1, "idle_session"}} {
		ref, _ := jobview.ParseRef(c.job)
		r, err := jobview.Build(context.Background(), o, ref)
		if err != nil {
			t.Fatalf("job %s under exported_* labels: %v", c.job, err)
		}
		if len(r.GPUs) != c.gpus || r.Coverage < 0.99 || r.NotEnoughData != "" {
			t.Errorf("job %s: %d GPUs, coverage %.3f %q; want %d GPUs fully covered", c.job, len(r.GPUs), r.Coverage, r.NotEnoughData, c.gpus)
		}
		var got []string
		for _, fd := range r.Findings {
			got = append(got, string(fd.Pattern))
		}
		if (c.pattern == "") != (len(got) == 0) || (c.pattern != "" && !strings.Contains(strings.Join(got, " "), c.pattern)) {
			t.Errorf("job %s: findings %v, want %q", c.job, got, c.pattern)
		}
	}
}
