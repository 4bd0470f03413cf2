// Package report_test runs the weekly reports end to end: a store filled
// as the analyzer would fill it, the scheduled job, a real SMTP server
// (mailpit) read back through its HTTP API, headless Chromium rendering
// the HTML, and the preview command.
package report_test

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/report/reporttest"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

var (
	berlin = mustLoc("Europe/Berlin")
	// W47 of 2026 in Berlin, and the Monday 09:00 slot that sends it.
	weekStart = time.Date(2026, 11, 16, 0, 0, 0, 0, berlin)
	slot      = time.Date(2026, 11, 23, 9, 0, 0, 0, berlin)
	teams     = []string{"ml-research", "vision", "nlp"}
)

func mustLoc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// expected are the sums a team's report must show, computed from the rows
// the fixture wrote (all inside W47, so no clipping applies).
type expected struct{ alloc, active, wasted float64 }

func fill(t *testing.T, path string) map[string]expected {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := reporttest.Fill(context.Background(), st, reporttest.Fleet{Seed: 47, GPUs: 48, Teams: teams,
		Start: weekStart, End: weekStart.AddDate(0, 0, 7), Keep: true})
	if err != nil {
		t.Fatal(err)
	}
	// The report's figures are the one accounting's: used is active time
	// less the waste taken out of it, and waste is capped at what was held.
	book := accounting.Build(weekStart, weekStart.AddDate(0, 0, 7), w.Usage, w.Findings)
	out := map[string]expected{}
	for _, a := range book.Allocations {
		for _, k := range []string{a.Team, ""} {
			e := out[k]
			e.alloc += a.Allocated
			e.active += a.Used
			e.wasted += a.Wasted
			out[k] = e
		}
	}
	for _, k := range append(teams, "") {
		if out[k].alloc == 0 || out[k].wasted == 0 {
			t.Fatalf("fixture gave %q no usage or no waste: %+v", k, out[k])
		}
	}
	return out
}

func recipients(team string) []string {
	return []string{team + "-lead@example.org", team + "@lists.example.org"}
}

type smtpOpts struct {
	port     int
	extra    string // appended to the smtp section
	ghost    bool   // add a team whose address the server refuses
	password string // written to the password file
}

func writeConfig(t *testing.T, o smtpOpts) *report.Config {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "smtp-password")
	if err := os.WriteFile(pw, []byte(o.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `timezone: Europe/Berlin
schedule: "0 9 * * MON"
currency: EUR
prices: {A100: 1.8, H100: 3.2, L40S: 1.1}
grafana: {url: "https://grafana.example.org"}
admins: [gpu-admins@example.org]
teams:
`)
	for _, tm := range teams {
		fmt.Fprintf(&b, "  %s:\n    recipients: [%s]\n", tm, strings.Join(recipients(tm), ", "))
	}
	if o.ghost {
		b.WriteString("  ghost:\n    recipients: [ghost@nowhere.invalid]\n")
	}
	fmt.Fprintf(&b, `smtp:
  host: 127.0.0.1
  port: %d
  tls: none
  auth: plain
  username: gpuwatch
  password_file: %s
  from: "gpuwatch <gpuwatch@example.org>"
  timeout: 5s
  retries: 2
  backoff: 20ms
%s`, o.port, pw, o.extra)
	path := filepath.Join(dir, "gpuwatch-report.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := report.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// daemon is one life of the analyzer daemon: an open store and the job.
type daemon struct {
	st  *store.Store
	job report.Job
}

func start(t *testing.T, dbPath string, cfg *report.Config) *daemon {
	t.Helper()
	st, err := store.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sender, err := mail.NewSMTP(cfg.SMTP, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, err := report.WeeklyJob(context.Background(), report.Deps{Store: st, Config: cfg, Sender: sender})
	if err != nil {
		t.Fatal(err)
	}
	return &daemon{st: st, job: job}
}

func (d *daemon) stop() { d.st.Close() }

// brief describes outbox entries without their (large) messages.
func brief(es []report.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "[%s %s %s attempts=%d error=%q] ", e.Kind, e.Team, e.Period, e.Attempts, e.LastError)
	}
	return b.String()
}

func (d *daemon) pending(t *testing.T) []report.Entry {
	t.Helper()
	ob, err := report.OpenOutbox(context.Background(), d.st)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ob.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const smtpUser, smtpPassword = "gpuwatch", "correct-horse-battery-staple"

func authFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "smtp-auth")
	if err := os.WriteFile(p, []byte(smtpUser+":"+smtpPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWeeklyReportsThroughMailpit(t *testing.T) {
	t.Parallel()
	mp := startMailpit(t, 0, "--smtp-auth-file", authFile(t), "--smtp-auth-allow-insecure")
	cfg := writeConfig(t, smtpOpts{port: mp.SMTPPort, password: smtpPassword})
	ctx := context.Background()

	t.Run("on time, again, and after a restart: once", func(t *testing.T) {
		mp.DeleteAll(t)
		db := filepath.Join(t.TempDir(), "state.db")
		want := fill(t, db)
		d := start(t, db, cfg)
		if err := d.job.Run(ctx, slot); err != nil {
			t.Fatal(err)
		}
		checkMessages(t, mp, want)
		if err := d.job.Run(ctx, slot.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		d.stop()
		d = start(t, db, cfg) // restart after sending
		if err := d.job.Run(ctx, slot.Add(3*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := len(mp.Messages(t)); n != len(teams)+1 {
			t.Fatalf("%d messages after re-runs and a restart, want %d", n, len(teams)+1)
		}
	})

	t.Run("missed slot: sent once after the restart", func(t *testing.T) {
		mp.DeleteAll(t)
		db := filepath.Join(t.TempDir(), "state.db")
		want := fill(t, db)
		d := start(t, db, cfg)
		// Sunday before the slot: W46 is due, and the store has nothing for it.
		if err := d.job.Run(ctx, slot.Add(-30*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := len(mp.Messages(t)); n != 0 {
			t.Fatalf("%d messages for an empty week", n)
		}
		d.stop() // down over Monday 09:00
		d = start(t, db, cfg)
		if err := d.job.Run(ctx, slot.Add(25*time.Hour)); err != nil { // the daemon's start-up run, Tuesday
			t.Fatal(err)
		}
		checkMessages(t, mp, want)
		d.stop()
		d = start(t, db, cfg)
		if err := d.job.Run(ctx, slot.Add(26*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if n := len(mp.Messages(t)); n != len(teams)+1 {
			t.Fatalf("%d messages after the second restart, want %d", n, len(teams)+1)
		}
	})
}

// checkMessages reads every message back and checks it against the data.
func checkMessages(t *testing.T, mp *mailpit, want map[string]expected) {
	t.Helper()
	msgs := mp.Messages(t)
	if len(msgs) != len(teams)+1 {
		t.Fatalf("%d messages, want one per team and one for the administrators (%d)", len(msgs), len(teams)+1)
	}
	byTo := map[string]summary{}
	for _, m := range msgs {
		var to []string
		for _, a := range m.To {
			to = append(to, a.Address)
		}
		sort.Strings(to)
		key := strings.Join(to, ",")
		if _, dup := byTo[key]; dup {
			t.Fatalf("two messages to %s", key)
		}
		byTo[key] = m
	}
	for _, team := range append(append([]string{}, teams...), "") {
		to := []string{"gpu-admins@example.org"}
		who := "fleet"
		if team != "" {
			to = recipients(team)
			who = "team " + team
		}
		sort.Strings(to)
		s, ok := byTo[strings.Join(to, ",")]
		if !ok {
			t.Errorf("no message to %v", to)
			continue
		}
		e := want[team]
		share := e.wasted / e.alloc
		wantSubject := fmt.Sprintf("[gpuwatch] GPU waste, %s, week 2026-W47: %s GPU-hours wasted (%s of %s allocated)",
			who, report.GPUHours(e.wasted), report.Percent(share), report.GPUHours(e.alloc))
		if s.Subject != wantSubject {
			t.Errorf("subject %q, want %q", s.Subject, wantSubject)
		}
		m := mp.Message(t, s.ID)
		if m.From.Address != "gpuwatch@example.org" {
			t.Errorf("from %+v", m.From)
		}
		for _, num := range []string{report.GPUHours(e.alloc) + " GPU-hours", report.GPUHours(e.active) + " GPU-hours",
			report.GPUHours(e.wasted) + " GPU-hours", report.Percent(share)} {
			if !strings.Contains(m.Text, num) {
				t.Errorf("%s: text part lacks %q", who, num)
			}
			if !strings.Contains(m.HTML, strings.TrimSuffix(num, " GPU-hours")) {
				t.Errorf("%s: HTML part lacks %q", who, num)
			}
		}
		// mailpit scores the HTML against caniemail.com's client data.
		var check struct {
			Total struct{ Supported, Unsupported float64 }
		}
		mp.Get(t, "/api/v1/message/"+m.ID+"/html-check", &check)
		if check.Total.Supported < 90 || check.Total.Unsupported > 3 {
			t.Errorf("%s: HTML is %.1f%% supported, %.1f%% unsupported in mail clients", who, check.Total.Supported, check.Total.Unsupported)
		}
		if len(m.Inline) != 2 {
			t.Fatalf("%s: %d inline parts, want the two charts: %+v (attachments %+v)", who, len(m.Inline), m.Inline, m.Attachments)
		}
		for _, p := range m.Inline {
			if p.ContentType != "image/png" || !strings.Contains(m.HTML, `src="cid:`+p.ContentID+`"`) {
				t.Errorf("%s: inline part %+v not referenced as cid in the HTML", who, p)
			}
			img, err := png.Decode(bytes.NewReader(mp.Part(t, m.ID, p.PartID)))
			if err != nil {
				t.Errorf("%s: inline %s does not decode as PNG: %v", who, p.FileName, err)
				continue
			}
			if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 150 {
				t.Errorf("%s: chart %s is only %v", who, p.FileName, b)
			}
		}
	}
}

func TestDeliveryFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := len(teams) + 1

	// Each case has a mailpit and a store of its own.
	t.Run("SMTP down, then up", func(t *testing.T) {
		t.Parallel()
		port := testtool.FreePort(t) // nothing listens yet
		cfg := writeConfig(t, smtpOpts{port: port, password: smtpPassword})
		db := filepath.Join(t.TempDir(), "state.db")
		fill(t, db)
		d := start(t, db, cfg)
		err := d.job.Run(ctx, slot)
		if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "3 attempts") {
			t.Fatalf("Run with SMTP down: %v", err)
		}
		if p := d.pending(t); len(p) != n || p[0].Attempts != 1 || p[0].LastError == "" {
			t.Fatalf("pending %d (want %d) %s", len(p), n, brief(p))
		}
		mp := startMailpit(t, port, "--smtp-auth-file", authFile(t), "--smtp-auth-allow-insecure")
		if err := d.job.Run(ctx, slot.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := len(mp.Messages(t)); got != n {
			t.Fatalf("%d messages once SMTP is up, want %d", got, n)
		}
		if p := d.pending(t); len(p) != 0 {
			t.Fatalf("still pending: %s", brief(p))
		}
	})

	t.Run("authentication refused, then fixed", func(t *testing.T) {
		t.Parallel()
		mp := startMailpit(t, 0, "--smtp-auth-file", authFile(t), "--smtp-auth-allow-insecure")
		db := filepath.Join(t.TempDir(), "state.db")
		fill(t, db)
		d := start(t, db, writeConfig(t, smtpOpts{port: mp.SMTPPort, password: "wrong password"}))
		err := d.job.Run(ctx, slot)
		if err == nil || !strings.Contains(err.Error(), "535") || !strings.Contains(err.Error(), "permanent") {
			t.Fatalf("Run with a wrong password: %v", err)
		}
		if strings.Contains(err.Error(), "wrong password") {
			t.Fatalf("error leaks the password: %v", err)
		}
		if p := d.pending(t); len(p) != n {
			t.Fatalf("pending %d, want %d", len(p), n)
		}
		d.stop()
		d = start(t, db, writeConfig(t, smtpOpts{port: mp.SMTPPort, password: smtpPassword}))
		if err := d.job.Run(ctx, slot.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if got := len(mp.Messages(t)); got != n {
			t.Fatalf("%d messages after fixing the password, want %d", got, n)
		}
	})

	t.Run("a refused address: the others go, it is kept", func(t *testing.T) {
		t.Parallel()
		mp := startMailpit(t, 0, "--smtp-auth-file", authFile(t), "--smtp-auth-allow-insecure",
			"--smtp-allowed-recipients", `@(lists\.)?example\.org$`)
		db := filepath.Join(t.TempDir(), "state.db")
		fill(t, db)
		d := start(t, db, writeConfig(t, smtpOpts{port: mp.SMTPPort, password: smtpPassword, ghost: true}))
		// The ghost team needs usage to get a report.
		if err := d.st.AddUsage(ctx, []store.Usage{{Start: weekStart.Add(time.Hour), End: weekStart.Add(2 * time.Hour),
			Hostname: "gpu-n9999", Job: "1", User: "casper", Team: "ghost", Kind: "batch", Model: "NVIDIA L40S", GPUs: 1,
			AllocatedGPUHours: 1}}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 2; i++ {
			err := d.job.Run(ctx, slot.Add(time.Duration(i)*time.Hour))
			if err == nil || !strings.Contains(err.Error(), "team ghost") {
				t.Fatalf("run %d: %v", i, err)
			}
			p := d.pending(t)
			if len(p) != 1 || p[0].Team != "ghost" || p[0].Attempts != i || !strings.Contains(p[0].LastError, "55") {
				t.Fatalf("run %d: pending %s", i, brief(p))
			}
			if got := len(mp.Messages(t)); got != n {
				t.Fatalf("run %d: %d messages, want %d", i, got, n)
			}
		}
	})
}
