package report

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/report/reporttest"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// benchFleet: 10,000 GPUs in 200 teams; the analyzer stored one interval
// per allocation per hour for the reported week and the 4 weeks of trend.
const (
	benchGPUs  = 10000
	benchTeams = 200
)

var benchWeek = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)

// benchStore fills (once per machine, cached in the temp dir: filling
// takes longer than the reports) and opens the benchmark's store.
func benchStore(b *testing.B) *store.Store {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gpuwatch-report-bench-v2-%d-%d.db", benchGPUs, benchTeams))
	if _, err := os.Stat(path); err != nil {
		tmp := path + ".tmp"
		os.Remove(tmp)
		st, err := store.Open(tmp)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := reporttest.Fill(context.Background(), st, reporttest.Fleet{Seed: 1, GPUs: benchGPUs, Teams: reporttest.Teams(benchTeams),
			Start: benchWeek.AddDate(0, 0, -28), End: benchWeek.AddDate(0, 0, 7)}); err != nil {
			b.Fatal(err)
		}
		if _, err := st.DB().Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			b.Fatal(err)
		}
		st.Close()
		if err := os.Rename(tmp, path); err != nil {
			b.Fatal(err)
		}
		b.Logf("filled %s in %v", path, time.Since(t0))
	}
	st, err := store.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

func benchConfig(b *testing.B) *Config {
	b.Helper()
	var y strings.Builder
	y.WriteString("timezone: UTC\ncurrency: EUR\nprices: {A100: 1.8, H100: 3.2, L40S: 1.1}\nadmins: [ops@example.org]\ngrafana: {url: https://grafana.example.org}\nteams:\n")
	for _, t := range reporttest.Teams(benchTeams) {
		fmt.Fprintf(&y, "  %s: {recipients: [%s@example.org]}\n", t, t)
	}
	c, err := ParseConfig("bench", []byte(y.String()))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

type discard struct{ n int }

func (d *discard) Send(context.Context, mail.Message) error { d.n++; return nil }

// peakRSS resets (reset=true) or reads the process's peak resident memory.
func peakRSS(reset bool) float64 {
	if reset {
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// cpuSeconds is the process's user+system CPU time: on a shared machine
// it is steadier than wall time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkBuildAllTeams: the numbers of 200 team reports and the fleet
// report for one week (with 4 weeks of trend) from the store.
func BenchmarkBuildAllTeams(b *testing.B) {
	st := benchStore(b)
	cfg := benchConfig(b)
	if _, err := OpenOutbox(context.Background(), st); err != nil { // the index reports rely on
		b.Fatal(err)
	}
	bl := NewBuilder(st, cfg)
	p := WeekOf(benchWeek, time.UTC)
	peakRSS(true)
	cpu0 := cpuSeconds()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs, fleet, err := bl.BuildAll(context.Background(), p, cfg.TeamNames(), true)
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != benchTeams || fleet.Totals.AllocatedGPUHours < 0.5*benchGPUs*168 {
			b.Fatalf("%d reports, fleet %+v", len(rs), fleet.Totals)
		}
	}
	b.ReportMetric(peakRSS(false), "peak-RSS-MiB")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}

// BenchmarkWeeklyJob: the whole weekly run: build, draw 400 charts, render
// HTML and text, queue 201 messages in the outbox and hand them to a
// sender (that discards them).
func BenchmarkWeeklyJob(b *testing.B) {
	st := benchStore(b)
	cfg := benchConfig(b)
	ctx := context.Background()
	slot := benchWeek.AddDate(0, 0, 7).Add(9 * time.Hour)
	peakRSS(true)
	cpu0 := cpuSeconds()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, err := st.DB().Exec(`DELETE FROM report_outbox`); err != nil {
			b.Fatal(err)
		}
		d := &discard{}
		job, err := WeeklyJob(ctx, Deps{Store: st, Config: cfg, Sender: d})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := job.Run(ctx, slot); err != nil {
			b.Fatal(err)
		}
		if d.n != benchTeams+1 {
			b.Fatalf("sent %d, want %d", d.n, benchTeams+1)
		}
	}
	b.ReportMetric(peakRSS(false), "peak-RSS-MiB")
	b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
}
