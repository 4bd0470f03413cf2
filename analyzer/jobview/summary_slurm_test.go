package jobview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
)

// buildGpuwatch builds the command the epilog companion runs.
func buildGpuwatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpuwatch")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gpuwatch").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// siteSettings points the test cluster's epilog (test/slurm/start.sh reads
// <dir>/etc/gpuwatch-slurm) at a Prometheus and a gpuwatch binary, with the
// least time budget, as other packages' jobs on the same Slurm meet it too.
func siteSettings(t *testing.T, conf, promURL, bin string) {
	t.Helper()
	f := filepath.Join(filepath.Dir(conf), "gpuwatch-slurm")
	body := "GPUWATCH_PROMETHEUS_URL='" + promURL + "'\nGPUWATCH_BIN='" + bin + "'\nGPUWATCH_SUMMARY_TIMEOUT=8\n"
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f) })
}

var adminComment = regexp.MustCompile(`AdminComment=(\S+)`)

func showComment(t *testing.T, id string) string {
	t.Helper()
	if m := adminComment.FindStringSubmatch(run(t, "scontrol", "--oneliner", "show", "job", id)); m != nil {
		return m[1]
	}
	return ""
}

// `gpuwatch job --summary`, as the epilog companion runs it, writes the
// summary into AdminComment on a real Slurm: `scontrol show job` shows it,
// and `gpuwatch job` decodes it once Prometheus is gone, with the figures
// the live view had. (It runs while the job still runs: slurmctld 22.05
// refuses `scontrol update` on a job that finished, so from the Epilog the
// write goes to accounting with sacctmgr, which needs slurmdbd.)
func TestSummaryRoundTripOnSlurm(t *testing.T) {
	_, mapDir := slurmEnv(t)
	bin := buildGpuwatch(t)
	id, gpus := submit(t, "jobview-summary", "sleep 300")
	prom := startScraping(t, startExporter(t, id, gpus, mapDir))
	time.Sleep(15 * time.Second)
	start := time.Now()
	if out, err := exec.Command(bin, "job", "--summary", "--prometheus.url="+prom, "--summary.timeout=10s", id).CombinedOutput(); err != nil {
		t.Fatalf("gpuwatch job --summary: %v\n%s", err, out)
	}
	took := time.Since(start)
	comment := showComment(t, id)
	t.Logf("AdminComment of %d bytes in %s: %s", len(comment), took.Round(time.Millisecond), comment)
	if len(comment) > 1024 || took > 15*time.Second {
		t.Errorf("comment of %d bytes after %s", len(comment), took)
	}
	dec, err := jobview.DecodeSummary(comment)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Note != "" || len(dec.GPUs) != 2 || dec.Account != "physics" || dec.JobName != "jobview-summary" || dec.State != "running" {
		t.Fatalf("summary %+v", dec)
	}
	// The live view of the same window agrees with the summary.
	c, _ := promapi.New(prom, promapi.Options{Timeout: 10 * time.Second})
	ref, _ := jobview.ParseRef(id)
	live, err := jobview.Build(context.Background(), jobview.Options{Querier: c, Lookback: 10 * time.Minute, Now: dec.End.Add(time.Second)}, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !live.Start.Truncate(time.Second).Equal(dec.Start) {
		t.Errorf("summary starts %s, live %s", dec.Start, live.Start)
	}
	for i, g := range dec.GPUs {
		if l := live.GPUs[i]; g.MemPeakMiB == nil || !near(*g.MemPeakMiB, roundTo3(*l.MemPeakMiB)) || g.Index != l.Index {
			t.Errorf("GPU %d: summary %s mem %v, live %s %v", i, g.Index, g.MemPeakMiB, l.Index, *l.MemPeakMiB)
		}
	}
	// Prometheus gone: gpuwatch job shows the summary from AdminComment.
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "job", "--prometheus.url=http://"+closedAddr(t), "--query.timeout=2s", "--format=json", id)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gpuwatch job with Prometheus down: %v\n%s", err, stderr.String())
	}
	var shown jobview.Report
	if err := json.Unmarshal(stdout.Bytes(), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Source != "admin_comment" || shown.Job != id || len(shown.GPUs) != 2 || *shown.GPUs[0].UtilMean != *dec.GPUs[0].UtilMean {
		t.Fatalf("shown %+v", shown)
	}
}

// The Epilog runs the companion; a Prometheus that accepts connections
// and never answers, or none at all, does not hold the Epilog past the
// companion's budget (the job leaves COMPLETING in time), and
// `gpuwatch job --summary` itself writes a short note saying why.
func TestSummaryPrometheusDown(t *testing.T) {
	conf, _ := slurmEnv(t)
	bin := buildGpuwatch(t)
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	go func() {
		var held []net.Conn
		for {
			c, err := hang.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c) // never answered
		}
	}()
	for _, tc := range []struct{ name, url, note string }{
		{"hanging", "http://" + hang.Addr().String(), "did not answer in time"},
		{"down", "http://" + closedAddr(t), "no summary: telemetry unreachable: dial tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, _ := submit(t, "jobview-"+tc.name, "sleep 300")
			start := time.Now()
			out, err := exec.Command(bin, "job", "--summary", "--prometheus.url="+tc.url, "--summary.timeout=3s", id).CombinedOutput()
			if err != nil {
				t.Fatalf("gpuwatch job --summary: %v\n%s", err, out)
			}
			took := time.Since(start)
			dec, err := jobview.DecodeSummary(showComment(t, id))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(dec.Note, tc.note) || took > 9*time.Second || len(dec.GPUs) != 0 {
				t.Errorf("note %q after %s", dec.Note, took)
			}
			// The Epilog with the companion pointed at this Prometheus.
			siteSettings(t, conf, tc.url, bin)
			start = time.Now()
			run(t, "scancel", id)
			for {
				st, _ := exec.Command("squeue", "--noheader", "--jobs="+id, "--format=%T").Output()
				if s := strings.TrimSpace(string(st)); s == "" || (s != "COMPLETING" && s != "RUNNING") {
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("job %s still completing after 30s: the epilog is held up", id)
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("note %q; epilog with the companion done %s after scancel", dec.Note, time.Since(start).Round(time.Millisecond))
			if d := time.Since(start); d > 8*time.Second+5*time.Second {
				t.Errorf("epilog took %s, budget 8s", d)
			}
		})
	}
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func roundTo3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }
