package report

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// recorder is a Sender that keeps messages and fails while failing is set.
type recorder struct {
	mu      sync.Mutex
	failing error
	sent    []mail.Message
	tries   int
}

func (r *recorder) Send(_ context.Context, m mail.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	if r.failing != nil {
		return r.failing
	}
	r.sent = append(r.sent, m)
	return nil
}

func (r *recorder) subjects() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, m := range r.sent {
		out = append(out, m.To[0]+" "+m.Subject)
	}
	sort.Strings(out)
	return out
}

func jobConfig(t *testing.T) *Config {
	t.Helper()
	c := handConfig(t)
	c.Admins = []string{"ops@example.org"}
	c.DigestSchedule = "0 7 * * *"
	return c
}

// fileStore opens (again) a store file, as a restarted daemon would.
func fileStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestWeeklyJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slot := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC) // Monday of W48, 09:00: W47 is due
	type run struct {
		at        time.Time
		restart   bool  // reopen the store and rebuild the job first
		failWith  error // the sender fails during this run
		wantSent  int   // messages delivered by this run
		wantError bool
	}
	cases := []struct {
		name string
		runs []run
	}{
		{"on time, then again: once", []run{
			{at: slot, wantSent: 3}, // ml, cv and the fleet report; idle team used nothing
			{at: slot.Add(time.Minute)},
		}},
		{"restart after sending sends nothing", []run{
			{at: slot, wantSent: 3},
			{at: slot.Add(2 * time.Hour), restart: true},
			{at: slot.Add(7 * 24 * time.Hour).Add(-time.Minute), restart: true},
		}},
		{"missed slot is caught up once after restart", []run{
			{at: slot.Add(-time.Hour), wantSent: 2}, // the previous slot: W46's reports (ml and the fleet)
			{at: slot.Add(26 * time.Hour), restart: true, wantSent: 3},
			{at: slot.Add(27 * time.Hour), restart: true},
		}},
		{"SMTP down: kept, sent on the next run", []run{
			{at: slot, failWith: errors.New("dial tcp: connection refused"), wantError: true},
			{at: slot.Add(time.Hour), failWith: errors.New("535 authentication refused"), wantError: true, restart: true},
			{at: slot.Add(2 * time.Hour), restart: true, wantSent: 3},
			{at: slot.Add(3 * time.Hour)},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own store file and sender
			path := filepath.Join(t.TempDir(), "state.db")
			seed := fileStore(t, path)
			copyHand(t, seed)
			var job Job
			var st *store.Store
			rec := &recorder{}
			build := func() {
				st = fileStore(t, path)
				var err error
				job, err = WeeklyJob(ctx, Deps{Store: st, Config: jobConfig(t), Sender: rec})
				if err != nil {
					t.Fatal(err)
				}
			}
			build()
			total := 0
			for i, r := range tc.runs {
				if r.restart {
					build()
				}
				rec.failing = r.failWith
				err := job.Run(ctx, r.at)
				if (err != nil) != r.wantError {
					t.Fatalf("run %d: error %v, want error %v", i, err, r.wantError)
				}
				got := len(rec.subjects()) - total
				total += got
				if got != r.wantSent {
					t.Fatalf("run %d: sent %d, want %d: %v", i, got, r.wantSent, rec.subjects())
				}
			}
			// Over all runs: W47's reports exactly once each.
			var w47 []string
			for _, s := range rec.subjects() {
				if strings.Contains(s, "2026-W47") {
					w47 = append(w47, s)
				}
			}
			if len(w47) != 3 || !strings.HasPrefix(w47[0], "cv@example.org [gpuwatch] GPU waste, team cv, week 2026-W47: 8.0 GPU-hours wasted (100.0% of 8.0 allocated)") ||
				!strings.HasPrefix(w47[1], "ml@example.org") || !strings.HasPrefix(w47[2], "ops@example.org [gpuwatch] GPU waste, fleet, week 2026-W47") {
				t.Errorf("W47 messages = %q", w47)
			}
			ob, err := OpenOutbox(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			pending, err := ob.Pending(ctx)
			if err != nil || len(pending) != 0 {
				t.Errorf("pending after all runs = %+v, %v", pending, err)
			}
		})
	}
}

// copyHand writes handStore's data into st.
func copyHand(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	src := handStore(t)
	far := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	us, err := src.UsageBetween(ctx, far, far.AddDate(100, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	rows, err := src.DB().QueryContext(ctx, `SELECT cycle_ms FROM findings GROUP BY cycle_ms`)
	if err != nil {
		t.Fatal(err)
	}
	var cycles []int64
	for rows.Next() {
		var c int64
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cycles = append(cycles, c)
	}
	rows.Close()
	for _, c := range cycles {
		at := time.UnixMilli(c)
		fs, err := src.FindingsBetween(ctx, at, at.Add(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveFindings(ctx, at, fs); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFailedDeliveryIsRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := handStore(t)
	rec := &recorder{failing: &mail.SendError{Attempts: 4, Err: errors.New("connection refused")}}
	slot := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	job, err := WeeklyJob(ctx, Deps{Store: st, Config: jobConfig(t), Sender: rec})
	if err != nil {
		t.Fatal(err)
	}
	err = job.Run(ctx, slot)
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "team ml") {
		t.Fatalf("Run error = %v", err)
	}
	ob, _ := OpenOutbox(ctx, st)
	pending, err := ob.Pending(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 3 {
		t.Fatalf("pending = %d, want 3", len(pending))
	}
	for _, e := range pending {
		if e.Attempts != 1 || !strings.Contains(e.LastError, "connection refused") || !e.LastAttempt.Equal(slot) ||
			len(e.Message.Inline) == 0 || e.Message.HTML == "" || e.Message.Text == "" {
			t.Errorf("pending entry %s/%s: attempts %d error %q inline %d", e.Kind, e.Team, e.Attempts, e.LastError, len(e.Message.Inline))
		}
	}
}

func TestDailyDigestJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := handStore(t)
	rec := &recorder{}
	cfg := jobConfig(t)
	job, ok, err := DailyDigestJob(ctx, Deps{Store: st, Config: cfg, Sender: rec})
	if err != nil || !ok {
		t.Fatalf("DailyDigestJob: ok %v err %v", ok, err)
	}
	if job.Spec != "CRON_TZ=UTC */5 * * * *" {
		t.Errorf("spec %q", job.Spec)
	}
	// Tuesday 07:00 of W47: Monday's digest.
	at := time.Date(2026, 11, 17, 7, 0, 0, 0, time.UTC)
	for i := 0; i < 2; i++ {
		if err := job.Run(ctx, at.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	s := rec.subjects()
	if len(s) != 1 || s[0] != "ops@example.org [gpuwatch] GPU waste, fleet, 2026-11-16: 9.0 GPU-hours wasted (28.1% of 32.0 allocated)" {
		t.Errorf("digests = %q", s)
	}
	cfg.DigestSchedule = ""
	if _, ok, _ := DailyDigestJob(ctx, Deps{Store: st, Config: cfg, Sender: rec}); ok {
		t.Error("digest job made without a digest schedule")
	}
}

func TestLastSlot(t *testing.T) {
	c := handConfig(t)
	c.TimeZone = "Europe/Berlin"
	c.Defaults()
	r, err := newRunner(context.Background(), Deps{Store: handStore(t), Config: c, Sender: &recorder{}}, c.Schedule, weeklyCatchUp)
	if err != nil {
		t.Fatal(err)
	}
	berlin := c.Location()
	cases := []struct {
		now  time.Time
		want string // slot in Berlin time; "" none
	}{
		{time.Date(2026, 11, 23, 9, 0, 0, 0, berlin), "2026-11-23 09:00"},
		{time.Date(2026, 11, 23, 8, 59, 0, 0, berlin), "2026-11-16 09:00"},
		{time.Date(2026, 11, 23, 8, 30, 0, 0, time.UTC), "2026-11-23 09:00"}, // 09:30 in Berlin
		{time.Date(2026, 11, 29, 23, 0, 0, 0, berlin), "2026-11-23 09:00"},
	}
	for _, tc := range cases {
		got, ok := LastSlot(r.sched, tc.now, weeklyCatchUp)
		if s := got.In(berlin).Format("2006-01-02 15:04"); !ok || s != tc.want {
			t.Errorf("LastSlot(%v) = %s %v, want %s", tc.now, s, ok, tc.want)
		}
	}
	if _, ok := LastSlot(r.sched, time.Date(2026, 11, 23, 10, 30, 0, 0, berlin), time.Hour); ok {
		t.Error("a slot found outside the lookback")
	}
}

// TestTicks runs the weekly job as the daemon does, every five minutes
// from Sunday to Wednesday, with SMTP down from Monday 08:00 to 11:00.
func TestTicks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := handStore(t)
	rec := &recorder{}
	job, err := WeeklyJob(ctx, Deps{Store: st, Config: jobConfig(t), Sender: rec})
	if err != nil {
		t.Fatal(err)
	}
	if job.Spec != "CRON_TZ=UTC */5 * * * *" {
		t.Errorf("spec %q", job.Spec)
	}
	slot := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	down := errors.New("connection refused")
	var firstW47 time.Time
	failedRuns := 0
	for now := slot.Add(-33 * time.Hour); now.Before(slot.Add(48 * time.Hour)); now = now.Add(5 * time.Minute) {
		rec.failing = nil
		if !now.Before(slot.Add(-time.Hour)) && now.Before(slot.Add(2*time.Hour)) {
			rec.failing = down
		}
		if err := job.Run(ctx, now); err != nil {
			failedRuns++
		}
		for _, s := range rec.subjects() {
			if firstW47.IsZero() && strings.Contains(s, "2026-W47") {
				firstW47 = now
			}
		}
	}
	var w47 int
	for _, s := range rec.subjects() {
		if strings.Contains(s, "2026-W47") {
			w47++
		}
	}
	if w47 != 3 {
		t.Errorf("W47 sent %d times over the ticks, want 3 (ml, cv, fleet): %q", w47, rec.subjects())
	}
	// Down at 09:00: attempts at 09:00, 09:05, 09:15, 09:35 (backoff 5, 10,
	// 20 min), then 10:15 still down, then 11:35 once SMTP is back.
	if want := slot.Add(2*time.Hour + 35*time.Minute); !firstW47.Equal(want) {
		t.Errorf("W47 first delivered at %v, want %v", firstW47, want)
	}
	if failedRuns != 5 {
		t.Errorf("%d runs failed, want 5 (one per attempt while SMTP was down)", failedRuns)
	}
}

func TestRetryAfter(t *testing.T) {
	for attempts, want := range map[int]time.Duration{0: 0, 1: 5 * time.Minute, 2: 10 * time.Minute, 4: 40 * time.Minute,
		7: 320 * time.Minute, 8: 6 * time.Hour, 50: 6 * time.Hour} {
		if got := RetryAfter(attempts); got != want {
			t.Errorf("RetryAfter(%d) = %v, want %v", attempts, got, want)
		}
	}
}
