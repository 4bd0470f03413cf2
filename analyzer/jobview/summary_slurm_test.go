package jobview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// buildGpuwatch builds the command the epilog companion runs.
func buildGpuwatch(t *testing.T) string {
	t.Helper()
	return testtool.Binary(t, "cmd/gpuwatch")
}

// siteSettings points the test cluster's epilog (test/slurm/start.sh reads
// <dir>/etc/gpuwatch-slurm) at a Prometheus and a gpuwatch binary, with the
// least time budget, as other packages' jobs on the same Slurm meet it too.
func siteSettings(t *testing.T, conf, promURL, bin string, budget int) {
	t.Helper()
	f := filepath.Join(filepath.Dir(conf), "gpuwatch-slurm")
	body := fmt.Sprintf("GPUWATCH_PROMETHEUS_URL='%s'\nGPUWATCH_BIN='%s'\nGPUWATCH_SUMMARY_TIMEOUT=%d\n", promURL, bin, budget)
	if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f) })
}

// showComment reads the job's AdminComment through the Slurm adapter
// (squeue's JSON): scontrol's text would give a job name's forged
// "AdminComment=" first.
func showComment(t *testing.T, id string) string {
	t.Helper()
	j, err := (&slurm.Client{Runner: execrun.Exec{Timeout: 10 * time.Second}}).Job(context.Background(), id)
	if err != nil || j == nil {
		t.Fatalf("job %s: %v %v", id, j, err)
	}
	return j.AdminComment
}

// `gpuwatch job --summary`, as the epilog companion runs it, writes the
// summary into AdminComment on a real Slurm: `scontrol show job` shows it,
// and `gpuwatch job` decodes it once Prometheus is gone, with the figures
// the live view had. (It runs while the job still runs, where `scontrol
// update` is allowed; from the Epilog see TestEpilogSummaryInAccounting.)
func TestSummaryRoundTripOnSlurm(t *testing.T) {
	_, mapDir := slurmEnv(t)
	bin := buildGpuwatch(t)
	id, gpus := submit(t, "jobview-summary", "sleep 300")
	prom := startScraping(t, startExporter(t, id, gpus, mapDir))
	awaitJobData(t, prom, id, len(gpus), 5, 4*time.Second)
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
			// The Epilog, with the companion pointed at this Prometheus,
			// on a second job (the first's note, written while it ran,
			// would reach accounting with the job's end anyway): its own
			// note lands in accounting within the budget.
			siteSettings(t, conf, tc.url, bin, 8)
			id2, _ := submit(t, "jobview-epilog-"+tc.name, "sleep 300")
			run(t, "scancel", id2)
			took = epilogTime(t, conf, id2)
			acct := accountingComment(t, id2)
			dec2, err := jobview.DecodeSummary(acct)
			if err != nil {
				t.Fatalf("accounting holds %q: %v", acct, err)
			}
			t.Logf("epilog with the companion took %s (Prometheus %s); note in accounting %q, state %q",
				took.Round(time.Millisecond), tc.name, dec2.Note, dec2.State)
			if !strings.Contains(dec2.Note, tc.note) || dec2.State != "completing" || dec2.Account != "physics" || len(dec2.GPUs) != 0 {
				t.Errorf("epilog's summary %+v", dec2)
			}
			if took > 8*time.Second {
				t.Errorf("epilog took %s, budget 8s", took)
			}
		})
	}
}

// The shipped Epilog runs the companion when a job ends by itself: the
// summary of its figures goes into accounting (slurmctld refuses `scontrol
// update` on a finished job, so through slurmdbd), `sacct -o AdminComment`
// shows it, and `gpuwatch job` decodes it with Prometheus down, equal to
// the live view of the same window.
func TestEpilogSummaryInAccounting(t *testing.T) {
	conf, mapDir := slurmEnv(t)
	testtool.Need(t, "sacct")
	bin := buildGpuwatch(t)
	const budget = 15
	// The job ends by itself once the test has seen its telemetry in
	// Prometheus (it waits for a file the test writes, five minutes at most).
	done := filepath.Join(t.TempDir(), "done")
	id, gpus := submit(t, "jobview-epilog", fmt.Sprintf("for i in $(seq 1500); do [ -e %s ] && exit 0; sleep 0.2; done; exit 1", done))
	prom := startScraping(t, startExporter(t, id, gpus, mapDir))
	siteSettings(t, conf, prom, bin, budget)
	awaitJobData(t, prom, id, len(gpus), 5, 4*time.Second)
	if err := os.WriteFile(done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	took := epilogTime(t, conf, id)
	comment := accountingComment(t, id)
	t.Logf("epilog with the companion took %s (Prometheus up); AdminComment in accounting of %d bytes", took.Round(time.Millisecond), len(comment))
	if took > budget*time.Second {
		t.Errorf("epilog took %s, budget %ds", took, budget)
	}
	dec, err := jobview.DecodeSummary(comment)
	if err != nil {
		t.Fatalf("accounting holds %q: %v", comment, err)
	}
	if dec.Note != "" || len(dec.GPUs) != 2 || dec.Account != "physics" || dec.JobName != "jobview-epilog" || dec.State != "completing" {
		t.Fatalf("summary %+v", dec)
	}
	c, _ := promapi.New(prom, promapi.Options{Timeout: 10 * time.Second})
	ref, _ := jobview.ParseRef(id)
	// The summary keeps whole seconds: the job's last sample lies within
	// the second after its End.
	live, err := jobview.Build(context.Background(), jobview.Options{Querier: c, Lookback: 10 * time.Minute, Now: dec.End.Add(time.Second)}, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !live.Start.Truncate(time.Second).Equal(dec.Start) || !live.End.Truncate(time.Second).Equal(dec.End) {
		t.Errorf("summary %s..%s, live %s..%s", dec.Start, dec.End, live.Start, live.End)
	}
	for i, g := range dec.GPUs {
		l := live.GPUs[i]
		if g.Index != l.Index || g.MemPeakMiB == nil || !near(*g.MemPeakMiB, roundTo3(*l.MemPeakMiB)) ||
			g.UtilMean == nil || !near(*g.UtilMean, roundTo3(*l.UtilMean)) {
			t.Errorf("GPU %d: summary %s util %v mem %v, live %s util %v mem %v", i, g.Index, deref(g.UtilMean), deref(g.MemPeakMiB), l.Index, deref(l.UtilMean), deref(l.MemPeakMiB))
		}
	}
	// Prometheus gone: `gpuwatch job` finds the summary in accounting,
	// first while slurmctld still remembers the finished job (without
	// the summary), then once it has forgotten it (MinJobAge).
	down := "--prometheus.url=http://" + closedAddr(t)
	for _, when := range []string{"finished job in slurmctld", "job gone from slurmctld"} {
		if when == "job gone from slurmctld" {
			testtool.Eventually(t, 90*time.Second, "job "+id+" gone from slurmctld", func() (bool, error) {
				return exec.Command("scontrol", "show", "job", id).Run() != nil, nil
			})
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(bin, "job", down, "--query.timeout=2s", "--format=json", id)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: gpuwatch job with Prometheus down: %v\n%s", when, err, stderr.String())
		}
		var shown jobview.Report
		if err := json.Unmarshal(stdout.Bytes(), &shown); err != nil {
			t.Fatal(err)
		}
		if shown.Source != "admin_comment" || shown.Job != id || len(shown.GPUs) != 2 || *shown.GPUs[1].UtilMean != *dec.GPUs[1].UtilMean {
			t.Fatalf("%s: shown %+v", when, shown)
		}
	}
}

// epilogTime waits for the job's Epilog to end and returns how long it
// ran, from the times test/slurm/start.sh's wrapper logs.
func epilogTime(t *testing.T, conf, id string) time.Duration {
	t.Helper()
	f := filepath.Join(filepath.Dir(filepath.Dir(conf)), "log", "epilog-times")
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			p := strings.Fields(line)
			if len(p) != 3 || p[0] != id {
				continue
			}
			t0, err0 := strconv.ParseFloat(p[1], 64)
			t1, err1 := strconv.ParseFloat(p[2], 64)
			if err0 != nil || err1 != nil {
				t.Fatalf("%s: %q", f, line)
			}
			return time.Duration((t1 - t0) * float64(time.Second))
		}
	}
	t.Fatalf("job %s: no Epilog ended within 90s (%s)", id, f)
	return 0
}

// accountingComment is the job's AdminComment as slurmdbd keeps it.
func accountingComment(t *testing.T, id string) string {
	t.Helper()
	return run(t, "sacct", "--noheader", "--parsable2", "--allocations", "--jobs="+id, "--format=AdminComment")
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

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
