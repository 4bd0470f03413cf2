package report_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

var jobOrigin = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// Three jobs end after three hours: alice's and bob's held GPUs without
// using them, carol's trained; dave's still runs when the mails go.
const jobFleet = `
name: jobmail
fleet: [{hostname: node-a, model: H100-SXM5-80GB, gpus: 8}]
workloads:
  - {id: "601", user: alice, team: vision, job_name: prep, node: node-a, gpus: [0, 1], start: 0s, duration: 3h, behaviour: cpu_only}
  - {id: "602", user: bob, team: nlp, node: node-a, gpus: [2], start: 0s, duration: 3h, behaviour: cpu_only}
  - {id: "603", user: carol, team: nlp, node: node-a, gpus: [3], start: 0s, duration: 3h, behaviour: training}
  - {id: "604", user: dave, team: nlp, node: node-a, gpus: [4], start: 0s, duration: 10h, behaviour: cpu_only}
`

// analyzed runs the real engine, cycle by cycle, over six simulated hours
// of the fleet, into a fresh analyzer store: the usage and findings the
// end-of-job mails start from.
func analyzed(t *testing.T) *store.Store {
	t.Helper()
	sc, err := sim.ParseScenario("jobmail", []byte(jobFleet))
	if err != nil {
		t.Fatal(err)
	}
	db, err := embedded.Open(filepath.Join(t.TempDir(), "tsdb"), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := context.Background()
	app := db.Appender()
	if _, err := simload.Replay(ctx, sc, simload.Options{Seed: 11, Origin: jobOrigin, To: 6 * time.Hour, Resolution: 30 * time.Second},
		func(ts time.Time, f []*dto.MetricFamily) error { return app.AppendFamilies(ctx, ts, f) }); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Querier: db, Store: st, Config: config.Default(), MaxCatchUp: 24})
	if err != nil {
		t.Fatal(err)
	}
	for now := jobOrigin.Add(2 * time.Hour); !now.After(jobOrigin.Add(6 * time.Hour)); now = now.Add(time.Hour) {
		if _, err := eng.Cycle(ctx, now); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func jobMailConfig(t *testing.T, smtpPort int, dryRun string) *report.Config {
	t.Helper()
	c, err := report.ParseConfig("test", []byte(fmt.Sprintf(`timezone: UTC
currency: EUR
prices: {H100: 4}
grafana: {url: "https://grafana.example.org"}
smtp: {host: 127.0.0.1, port: %d, tls: none, from: "gpuwatch <gpuwatch@example.org>", timeout: 2s, retries: 0}
job_mail:
  enabled: true
  %s
  min_wasted_gpu_hours: 1
  min_wasted_share: 0.5
  domain: example.org
  addresses: {carol: carol@lab.example.org}
  opt_out: [bob]
`, smtpPort, dryRun)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func events(t *testing.T, lg *audit.Log) []string {
	t.Helper()
	evs, err := lg.Events(context.Background(), audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s %s dry=%v attempt=%d %s", e.Job, e.User, e.State, e.DryRun, e.Attempt, e.Detail))
	}
	return out
}

func tick(t *testing.T, st *store.Store, cfg *report.Config, sender mail.Sender, lg *audit.Log, at time.Time) error {
	t.Helper()
	job, err := report.JobMailJob(context.Background(), report.Deps{Store: st, Config: cfg, Sender: sender}, lg)
	if err != nil {
		t.Fatal(err)
	}
	return job.Run(context.Background(), at)
}

// End-of-job mails from the engine's own findings on simulated telemetry,
// through a real SMTP server (mailpit): dry-run by default (audited, not
// sent), then sent once to the owner of the wasteful ended job; the
// opted-out user, the efficient job and the running job get nothing; a
// failed delivery is audited and retried at the next tick.
func TestJobMailThroughMailpit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	at := jobOrigin.Add(6 * time.Hour)

	// Each case has its own store and its own mailpit: they run in parallel.
	t.Run("dry run", func(t *testing.T) {
		t.Parallel()
		mp := testtool.StartMailpit(t, 0)
		st := analyzed(t)
		lg, _ := audit.Open(ctx, st)
		cfg := jobMailConfig(t, mp.SMTPPort, "")
		sender, err := mail.NewSMTP(cfg.SMTP, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tick(t, st, cfg, sender, lg, at); err != nil {
			t.Fatal(err)
		}
		if n := len(mp.Messages(t)); n != 0 {
			t.Fatalf("dry run sent %d mails", n)
		}
		got := strings.Join(events(t, lg), "\n")
		t.Logf("audit:\n%s", got)
		for _, want := range []string{"601 alice dry_run dry=true attempt=1 would mail alice@example.org: GPU job 601 on node-a ended",
			"602 bob skipped dry=true attempt=1 opted out"} {
			if !strings.Contains(got, want) {
				t.Errorf("audit lacks %q", want)
			}
		}
		if strings.Contains(got, "603") || strings.Contains(got, "604") {
			t.Errorf("the efficient or the running job was considered:\n%s", got)
		}
		// Decided once: a later tick adds nothing.
		n := len(events(t, lg))
		if err := tick(t, st, cfg, sender, lg, at.Add(5*time.Minute)); err != nil || len(events(t, lg)) != n {
			t.Errorf("second tick: %v, %d events after %d", err, len(events(t, lg)), n)
		}
	})

	t.Run("sent", func(t *testing.T) {
		t.Parallel()
		mp := testtool.StartMailpit(t, 0)
		st := analyzed(t)
		lg, _ := audit.Open(ctx, st)
		cfg := jobMailConfig(t, mp.SMTPPort, "dry_run: false")
		// The SMTP server is away at the first tick.
		down := *cfg
		down.SMTP.Port = testtool.FreePort(t)
		broken, err := mail.NewSMTP(down.SMTP, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tick(t, st, cfg, broken, lg, at); err == nil {
			t.Fatal("no error with the SMTP server down")
		}
		sender, err := mail.NewSMTP(cfg.SMTP, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The outbox waits RetryAfter(1) before the next attempt.
		if err := tick(t, st, cfg, sender, lg, at.Add(report.RetryAfter(1))); err != nil {
			t.Fatal(err)
		}
		if err := tick(t, st, cfg, sender, lg, at.Add(report.RetryAfter(1)+5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		msgs := mp.Messages(t)
		if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0].Address != "alice@example.org" ||
			msgs[0].Subject != "GPU job 601 on node-a ended: 100.0% of its GPU time wasted" {
			t.Fatalf("mails %+v", msgs)
		}
		m := mp.Message(t, msgs[0].ID)
		for _, want := range []string{"Your GPU job 601 (prep) on node-a has ended.", "[cpu_only]", "Wasted share:   100.0%", "gpuwatch job 601",
			"var-hostname=node-a&var-job=601", "Held 2 GPUs without ever using the GPU"} {
			if !strings.Contains(m.Text, want) {
				t.Errorf("text lacks %q:\n%s", want, m.Text)
			}
		}
		if !strings.Contains(m.HTML, "Job 601 (prep) on node-a") {
			t.Errorf("html:\n%s", m.HTML)
		}
		got := strings.Join(events(t, lg), "\n")
		t.Logf("audit:\n%s\ntext:\n%s", got, m.Text)
		for _, want := range []string{"601 alice intended dry=false attempt=1", "601 alice failed dry=false attempt=1",
			"601 alice intended dry=false attempt=2", "601 alice done dry=false attempt=2 mailed alice@example.org: GPU job 601",
			"602 bob skipped dry=false attempt=1 opted out"} {
			if !strings.Contains(got, want) {
				t.Errorf("audit lacks %q", want)
			}
		}
	})
}

func TestJobMailAddress(t *testing.T) {
	cfg := jobMailConfig(t, 25, "")
	for _, tc := range []struct{ user, addr, why string }{
		{"alice", "alice@example.org", ""},
		{"carol", "carol@lab.example.org", ""},
		{"bob", "", "opted out"},
		{"eve@evil.example", "", "no address"},
		{"mallory\r\nBcc: x@y", "", "no address"},
		{"a,b", "", "no address"},
		{"", "", "no address"},
	} {
		addr, ok, why := cfg.JobMail.Address(tc.user)
		if addr != tc.addr || ok != (tc.addr != "") || why != tc.why {
			t.Errorf("%q: %q %v %q", tc.user, addr, ok, why)
		}
	}
	for _, bad := range []string{"job_mail: {enabled: true}", "job_mail: {min_wasted_share: 2}", "job_mail: {domain: \"a b\"}",
		"job_mail: {addresses: {x: not-an-address}}", "job_mail: {ended_after: -5m}"} {
		if _, err := report.ParseConfig("bad", []byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
