package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
)

func open(t *testing.T, path string) *Log {
	t.Helper()
	st, err := store.OpenURL(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestIntendFinishIdempotent(t *testing.T) {
	t.Parallel()
	testIntendFinishIdempotent(t, t.TempDir()+"/s.db")
}

func TestIntendFinishIdempotentPostgres(t *testing.T) {
	t.Parallel()
	testIntendFinishIdempotent(t, testpg.URL(t))
}

func testIntendFinishIdempotent(t *testing.T, path string) {
	ctx := context.Background()
	l := open(t, path)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	key := Key("n1|5|cpu_only", t0, "reclaim")
	rec := Record{Key: key, FindingKey: "n1|5|cpu_only", Episode: t0, Step: "reclaim", Actuator: "slurm", Hostname: "n1", Job: "5"}
	if _, ok, err := l.Intend(ctx, rec, t0); err != nil || !ok {
		t.Fatalf("first intend: %v %v", ok, err)
	}
	// Intended but unsettled: nobody may run it again.
	if got, ok, err := l.Intend(ctx, rec, t0.Add(time.Minute)); err != nil || ok || got.State != Intended {
		t.Fatalf("second intend ran: %v %+v %v", ok, got, err)
	}
	// The same key survives a reopen (a crash) as pending.
	l2 := open(t, path)
	pending, err := l2.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Key != key {
		t.Fatalf("pending = %+v %v", pending, err)
	}
	if err := l2.Finish(ctx, key, Failed, "refused", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := l2.Finish(ctx, key, Done, "twice", t0.Add(2*time.Minute)); err == nil {
		t.Fatal("finished a step that was not intended")
	}
	// Failed may be retried, under the same key, attempt 2.
	got, ok, err := l2.Intend(ctx, rec, t0.Add(3*time.Minute))
	if err != nil || !ok || got.Attempts != 2 {
		t.Fatalf("retry: %v %+v %v", ok, got, err)
	}
	if err := l2.Finish(ctx, key, Done, "cancelled", t0.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := l2.Intend(ctx, rec, t0.Add(5*time.Minute)); ok {
		t.Fatal("done step ran again")
	}
	n, err := l2.RealAttemptsSince(ctx, "reclaim", t0)
	if err != nil || n != 2 {
		t.Fatalf("attempts = %d %v", n, err)
	}
	evs, err := l2.Events(ctx, Filter{Job: "5"})
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, e := range evs {
		states = append(states, string(e.State))
	}
	if strings.Join(states, ",") != "intended,failed,intended,done" {
		t.Fatalf("events = %v", states)
	}
	last, _ := l2.Events(ctx, Filter{Limit: 1})
	if len(last) != 1 || last[0].State != Done {
		t.Fatalf("limit 1 = %+v", last)
	}
	var tb, jb bytes.Buffer
	if err := WriteTable(&tb, evs); err != nil || !strings.Contains(tb.String(), "cancelled") {
		t.Fatalf("table: %v\n%s", err, tb.String())
	}
	if err := WriteJSON(&jb, evs); err != nil {
		t.Fatal(err)
	}
	var back []Event
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil || len(back) != 4 {
		t.Fatalf("json: %v %d", err, len(back))
	}
}

func TestEpisodes(t *testing.T) {
	t.Parallel()
	testEpisodes(t, ":memory:")
}

func TestEpisodesPostgres(t *testing.T) {
	t.Parallel()
	testEpisodes(t, testpg.URL(t))
}

func testEpisodes(t *testing.T, path string) {
	ctx := context.Background()
	l := open(t, path)
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for i, want := range []time.Time{t0, t0, t0} {
		got, err := l.Observe(ctx, "k", t0.Add(time.Duration(i)*time.Minute))
		if err != nil || !got.Equal(want) {
			t.Fatalf("observe %d = %v %v", i, got, err)
		}
		if _, err := l.EndEpisodes(ctx, t0.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	// Not seen at +5m: the episode ends; seen again it starts afresh.
	if n, _ := l.EndEpisodes(ctx, t0.Add(5*time.Minute)); n != 1 {
		t.Fatalf("ended %d", n)
	}
	if got, _ := l.Observe(ctx, "k", t0.Add(6*time.Minute)); !got.Equal(t0.Add(6 * time.Minute)) {
		t.Fatalf("new episode starts %v", got)
	}
}

// The reports read the settled steps of this log through the store
// (ActionsBetween): a dry-run shows, a step still only intended does not.
func TestReportsReadSettledSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := Open(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	r := Record{Key: "k", Step: "reclaim", Actuator: "slurm", Job: "5", Team: "vision", Pattern: "cpu_only", DryRun: true}
	if _, _, err := l.Intend(ctx, r, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, "k", DryRun, "would cancel", t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Intend(ctx, Record{Key: "k2", Step: "warn", Job: "6"}, t0); err != nil {
		t.Fatal(err)
	}
	as, err := st.ActionsBetween(ctx, t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 1 || as[0].Step != "reclaim" || as[0].State != string(DryRun) || as[0].Team != "vision" || !as[0].DryRun {
		t.Fatalf("actions = %+v, want the one dry-run reclaim", as)
	}
}

// Two analyzers on one database (a second replica, or a manual --once next
// to the daemon) race for the same step: exactly one may run it.
func TestIntendRaceAcrossConnections(t *testing.T) {
	t.Parallel()
	testIntendRace(t, t.TempDir()+"/s.db")
}

// The same on a shared PostgreSQL, whose read-committed transactions let
// both replicas read "not there yet": the insert's compare-and-set decides.
func TestIntendRaceAcrossReplicasPostgres(t *testing.T) {
	t.Parallel()
	testIntendRace(t, testpg.URL(t))
}

func testIntendRace(t *testing.T, path string) {
	ctx := context.Background()
	logs := []*Log{open(t, path), open(t, path)}
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	for round := 0; round < 20; round++ {
		key := Key("n1|9|cpu_only", t0, "reclaim") + "|" + string(rune('a'+round))
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func(l *Log) {
				defer wg.Done()
				_, ok, err := l.Intend(ctx, Record{Key: key, Step: "reclaim", Job: "9"}, t0)
				if err == nil && ok {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}(logs[i])
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d analyzers may run the step, want exactly 1", round, won)
		}
	}
}

// TestTableEscapesTerminalControls stores a step of a job whose name and
// failure detail hold escape sequences and newlines: the table shows them
// escaped, one row per event, and clears or recolours nothing.
func TestTableEscapesTerminalControls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := open(t, t.TempDir()+"/s.db")
	t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	job := "train\x1b[2J\x1b[H\nTIME  STEP  forged"
	key := Key("n1|5|cpu_only", t0, "warn")
	rec := Record{Key: key, FindingKey: "n1|5|cpu_only", Episode: t0, Step: "warn", Actuator: "slurm", Hostname: "n1", Job: job, User: "u\u202eevil"}
	if _, _, err := l.Intend(ctx, rec, t0); err != nil {
		t.Fatal(err)
	}
	if err := l.Finish(ctx, key, Failed, "relay said:\r\n\x1b]0;pwned\x07", t0); err != nil {
		t.Fatal(err)
	}
	evs, err := l.Events(ctx, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, evs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\r\u202e") {
		t.Fatalf("table holds raw terminal controls: %q", out)
	}
	if n := strings.Count(out, "\n"); n != len(evs)+1 {
		t.Fatalf("%d events gave %d lines:\n%s", len(evs), n, out)
	}
	if !strings.Contains(out, `train\x1b[2J\x1b[H\nTIME  STEP  forged`) {
		t.Errorf("job name not shown escaped:\n%s", out)
	}
}
