package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/schema"
)

// analyzeStore writes 3 hours of one idle Slurm job into an embedded store,
// as the agent keeps it (DIR/tsdb).
func analyzeStore(t *testing.T, from time.Time) string {
	t.Helper()
	dir := t.TempDir()
	db, err := embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ss []embedded.Sample
	for off := time.Duration(0); off < 3*time.Hour; off += 30 * time.Second {
		for _, m := range []struct {
			metric *schema.Metric
			v      float64
		}{{schema.GPUUtil, 0}, {schema.FBUsed, 0}, {schema.FBFree, 81000}} {
			l := map[string]string{"__name__": m.metric.Name, schema.LabelUUID: "GPU-1", schema.LabelGPU: "0",
				schema.LabelOldHost: "node-7", schema.LabelModelName: "A100"}
			if off >= 10*time.Minute {
				l[schema.LabelHPCJob] = "4242"
			}
			ss = append(ss, embedded.Sample{Labels: l, T: from.Add(off), V: m.v})
		}
	}
	if err := db.Appender().AppendSamples(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// captureStdout runs f with os.Stdout redirected and returns what it wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	f()
	w.Close()
	os.Stdout = old
	return <-done
}

func TestAnalyzeCommand(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	dir := analyzeStore(t, from)
	window := []string{"--from=" + from.Format(time.RFC3339), "--to=" + from.Add(3*time.Hour).Format(time.RFC3339)}
	var stderr bytes.Buffer
	out := captureStdout(t, func() {
		if code := run(append([]string{"analyze", "--tsdb.path=" + dir, "--format=json"}, window...), &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	var res struct {
		Findings []struct {
			Pattern, Job, Hostname, Action string
			GPUs                           []string `json:"gpus"`
			Wasted                         float64  `json:"wasted_gpu_hours"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(res.Findings) != 1 || res.Findings[0].Pattern != "cpu_only" || res.Findings[0].Job != "4242" ||
		res.Findings[0].Hostname != "node-7" || res.Findings[0].Wasted < 2.5 {
		t.Fatalf("findings %+v, want cpu_only on 4242@node-7 (~2.8 GPU-hours)", res.Findings)
	}
	out = captureStdout(t, func() {
		if code := run(append([]string{"analyze", "--tsdb.path=" + dir}, window...), &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	if !strings.Contains(out, "cpu_only") || !strings.Contains(out, "TOTAL") {
		t.Errorf("table output:\n%s", out)
	}
}

func TestAnalyzeCommandUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("patterns:\n  cpu_only:\n    min_duraton: 1h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no source", []string{"analyze"}, "exactly one of --prometheus.url and --tsdb.path"},
		{"two sources", []string{"analyze", "--prometheus.url=http://x", "--tsdb.path=" + dir}, "exactly one"},
		{"bad time", []string{"analyze", "--tsdb.path=" + dir, "--from=yesterday"}, "--from"},
		{"empty window", []string{"analyze", "--tsdb.path=" + dir, "--from=-1h", "--to=-2h"}, "must be after"},
		{"bad config", []string{"analyze", "--tsdb.path=" + dir, "--analyzer.config=" + bad}, "bad.yaml:3: patterns.cpu_only.min_duraton: unknown key"},
		{"bad config, old spelling", []string{"analyze", "--tsdb.path=" + dir, "--config=" + bad}, "bad.yaml:3: patterns.cpu_only.min_duraton"},
		{"bad url", []string{"analyze", "--prometheus.url=prometheus:9090"}, "http://"},
		{"bad format", []string{"analyze", "--tsdb.path=" + dir, "--format=xml"}, "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(tc.args, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("stderr lacks %q: %s", tc.msg, stderr.String())
			}
		})
	}
}

// TestAnalyzeCoverage: an empty result says why, from what the data held.
func TestAnalyzeCoverage(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	dir := analyzeStore(t, from)
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []string
	}{
		{"no data", from.Add(-48 * time.Hour), from.Add(-24 * time.Hour), []string{"Saw 0 GPUs", "No findings: no data"}},
		{"short window", from.Add(10 * time.Minute), from.Add(35 * time.Minute), []string{"Saw 1 GPUs and 1 allocations", "window too short: 25m0s of data"}},
		{"unknown label convention", from.Add(-1 * time.Hour), from.Add(5 * time.Minute), []string{"no allocation on 1 GPUs", "label convention"}},
		{"found", from, from.Add(3 * time.Hour), []string{"Saw 1 GPUs and 1 allocations over 3h0m0s", "% of GPU-steps had data."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			out := captureStdout(t, func() {
				args := []string{"analyze", "--tsdb.path=" + dir, "--from=" + tc.from.Format(time.RFC3339), "--to=" + tc.to.Format(time.RFC3339)}
				if code := run(args, &stderr); code != 0 {
					t.Errorf("exit %d: %s", code, stderr.String())
				}
			})
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	out := captureStdout(t, func() {
		var stderr bytes.Buffer
		run([]string{"analyze", "--tsdb.path=" + dir, "--format=json", "--from=" + from.Add(-48*time.Hour).Format(time.RFC3339),
			"--to=" + from.Add(-24*time.Hour).Format(time.RFC3339)}, &stderr)
	})
	var res struct {
		Coverage struct {
			GPUs   int    `json:"gpus"`
			Reason string `json:"reason"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || !strings.HasPrefix(res.Coverage.Reason, "no data") {
		t.Errorf("json coverage %+v (%v):\n%s", res.Coverage, err, out)
	}
}

// TestAnalyzeNamesExporters: data scraped with honor_labels: false from
// NVIDIA's Helm chart (pod <release>-dcgm-exporter-<hash>, container
// exporter): the exporter's pod on a free GPU is no job, and analyze says
// in its table and its JSON which pod it took for the exporter and why.
func TestAnalyzeNamesExporters(t *testing.T) {
	from := time.Date(2026, 2, 3, 0, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	db, err := embedded.Open(filepath.Join(dir, "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const exporter = "obs-dcgm-exporter-x7k2p"
	var ss []embedded.Sample
	for off := time.Duration(0); off < 3*time.Hour; off += 30 * time.Second {
		for gpu, held := range []bool{true, false} {
			for _, m := range []struct {
				metric *schema.Metric
				v      float64
			}{{schema.GPUUtil, 0}, {schema.FBUsed, 0}, {schema.FBFree, 81000}} {
				l := map[string]string{"__name__": m.metric.Name, schema.LabelUUID: "GPU-" + string(rune('a'+gpu)), schema.LabelGPU: "0",
					schema.LabelHostname: "node-7", schema.LabelModelName: "A100", schema.LabelPod: exporter,
					schema.LabelNamespace: "monitoring", schema.LabelContainer: "exporter"}
				if held {
					l["exported_pod"], l["exported_namespace"], l["exported_container"] = "etl-0", "data", "main"
				}
				ss = append(ss, embedded.Sample{Labels: l, T: from.Add(off), V: m.v})
			}
		}
	}
	if err := db.Appender().AppendSamples(context.Background(), ss); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"analyze", "--tsdb.path=" + dir, "--from=" + from.Format(time.RFC3339), "--to=" + from.Add(3*time.Hour).Format(time.RFC3339)}
	var stderr bytes.Buffer
	out := captureStdout(t, func() {
		if code := run(append(args, "--format=json"), &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	var res struct {
		Findings []struct{ Job string } `json:"findings"`
		Coverage struct {
			Exporters []struct{ Namespace, Pod, Reason string } `json:"exporters"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(res.Findings) != 1 || res.Findings[0].Job != "data/etl-0" {
		t.Errorf("findings %+v, want one, on data/etl-0 only", res.Findings)
	}
	if x := res.Coverage.Exporters; len(x) != 1 || x[0].Namespace != "monitoring" || x[0].Pod != exporter || !strings.Contains(x[0].Reason, "honor_labels") {
		t.Errorf("exporters %+v, want monitoring/%s with its evidence", x, exporter)
	}
	out = captureStdout(t, func() {
		if code := run(args, &stderr); code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	})
	if !strings.Contains(out, "Taken as GPU exporters") || !strings.Contains(out, "monitoring/"+exporter+": scrape target") {
		t.Errorf("table does not name the exporter:\n%s", out)
	}
}
