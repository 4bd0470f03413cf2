package store

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/internal/testpg"
	"github.com/gpuwatch/gpuwatch/schema"
)

// backends runs a test on a SQLite file and on a real PostgreSQL database
// (test/postgres/start.sh); open gives another handle on the same one, as a
// second replica would have.
func backends(t *testing.T, f func(t *testing.T, open func(t *testing.T) *Store)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "s.db")
		f(t, func(t *testing.T) *Store { return mustOpen(t, path) })
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		u := testpg.URL(t)
		f(t, func(t *testing.T) *Store { return mustOpen(t, u) })
	})
}

func mustOpen(t *testing.T, u string) *Store {
	t.Helper()
	s, err := OpenURL(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLeaseOneHolderPostgres(t *testing.T) {
	t.Parallel()
	u := testpg.URL(t)
	testLeaseOneHolder(t, mustOpen(t, u), mustOpen(t, u))
}

// Replicas starting together migrate the shared database once: the
// advisory lock keeps them from running the same step twice.
func TestPostgresMigratesOnceConcurrently(t *testing.T) {
	t.Parallel()
	u := testpg.URL(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := OpenURL(u)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := mustOpen(t, u)
	v, err := s.Version(context.Background())
	if err != nil || v != SchemaVersion() {
		t.Fatalf("version %d (%v), want %d", v, err, SchemaVersion())
	}
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("schema_version rows %d (%v), want 1", n, err)
	}
	// Milliseconds since 1970 need 64 bits; usage hours are doubles.
	var typ string
	if err := s.DB().QueryRow(`SELECT data_type FROM information_schema.columns WHERE table_name = 'usage' AND column_name = 'start_ms'`).Scan(&typ); err != nil || typ != "bigint" {
		t.Fatalf("usage.start_ms is %q (%v), want bigint", typ, err)
	}
}

// The same reads on both: replaced intervals are not counted twice, the
// newest cycle's finding wins, a withdrawn one goes, and per-period sums
// and the settled action log come back whole.
func TestStoreReadsBothBackends(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, open func(t *testing.T) *Store) {
		ctx := context.Background()
		a, b := open(t), open(t)
		t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
		u := Usage{Start: t0, End: t0.Add(time.Hour), Hostname: "n1", Job: "1", User: "ann", Team: "ml", Kind: "batch", Model: "H100",
			GPUs: 2, AllocatedGPUHours: 2, ActiveGPUHours: 0.5}
		if err := a.AddUsage(ctx, []Usage{u}); err != nil {
			t.Fatal(err)
		}
		u.ActiveGPUHours = 1.25 // the same interval again, from the other replica
		if err := b.AddUsage(ctx, []Usage{u, {Start: t0.Add(2 * time.Hour), End: t0.Add(3 * time.Hour), Hostname: "n2", Job: "2",
			User: "bo", Team: "cv", GPUs: 1, AllocatedGPUHours: 1}}); err != nil {
			t.Fatal(err)
		}
		got, err := a.UsageBetween(ctx, t0, t0.Add(24*time.Hour))
		if err != nil || len(got) != 2 || got[0].ActiveGPUHours != 1.25 || got[0].User != "ann" || !got[0].Start.Equal(t0) {
			t.Fatalf("usage %+v %v", got, err)
		}
		sums, err := a.UsageTotals(ctx, []time.Time{t0, t0.Add(time.Hour), t0.Add(24 * time.Hour)})
		if err != nil || len(sums) != 2 || len(sums[0]) != 1 || len(sums[1]) != 1 || sums[0][0].User != "ann" ||
			sums[0][0].AllocatedGPUHours != 2 || sums[1][0].Team != "cv" {
			t.Fatalf("totals %+v %v", sums, err)
		}
		f := finding.Finding{Hostname: "n1", Job: "1", Pattern: schema.CPUOnly, WastedGPUHours: 1, Start: t0, End: t0.Add(time.Hour)}
		if err := a.SaveFindings(ctx, t0.Add(time.Hour), []finding.Finding{f}); err != nil {
			t.Fatal(err)
		}
		f.WastedGPUHours = 3
		for _, cycle := range []time.Duration{time.Hour, 2 * time.Hour} {
			if err := b.SaveFindings(ctx, t0.Add(cycle), []finding.Finding{f}); err != nil {
				t.Fatal(err)
			}
		}
		fs, err := a.FindingsBetween(ctx, t0, t0.Add(24*time.Hour))
		if err != nil || len(fs) != 1 || fs[0].WastedGPUHours != 3 {
			t.Fatalf("findings %+v %v", fs, err)
		}
		if err := a.WithdrawFindings(ctx, map[string]time.Time{f.Key(): t0}); err != nil {
			t.Fatal(err)
		}
		if fs, err := b.FindingsBetween(ctx, t0, t0.Add(24*time.Hour)); err != nil || len(fs) != 0 {
			t.Fatalf("withdrawn findings %+v %v", fs, err)
		}
		if _, err := a.DB().Exec(`INSERT INTO audit_events (at_ms, idem_key, step, actuator, hostname, job, user, team,
			pattern, tier, dry_run, state, attempt, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
			t0.UnixMilli(), "k", "warn", "webhook", "n1", "1", "ann", "ml", "cpu_only", "dev", true, "dry_run", 1, "it's quoted"); err != nil {
			t.Fatal(err)
		}
		acts, err := b.ActionsBetween(ctx, t0, t0.Add(time.Hour))
		if err != nil || len(acts) != 1 || acts[0].User != "ann" || !acts[0].DryRun || !acts[0].Time.Equal(t0) {
			t.Fatalf("actions %+v %v", acts, err)
		}
	})
}

func TestRebind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{`SELECT user, team FROM usage WHERE job = ? AND start_ms >= ?`, `SELECT "user", team FROM usage WHERE job = $1 AND start_ms >= $2`},
		{`SELECT MAX(user) FROM t WHERE a = '?' AND b = ?`, `SELECT MAX("user") FROM t WHERE a = '?' AND b = $1`},
		{`UPDATE t SET d = 'it''s ? user' WHERE "user" = ? -- a ? comment`, `UPDATE t SET d = 'it''s ? user' WHERE "user" = $1 -- a ? comment`},
		{`SELECT users, username, x.user FROM t`, `SELECT users, username, x.user FROM t`},
	} {
		if got := rebind(c.in); got != c.want {
			t.Errorf("rebind(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
	ddl := pgDDL(`CREATE TABLE x (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER NOT NULL, h REAL, s TEXT NOT NULL DEFAULT '')`)
	want := `CREATE TABLE x (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT NOT NULL, h DOUBLE PRECISION, s TEXT COLLATE "C" NOT NULL DEFAULT '')`
	if ddl != want {
		t.Errorf("pgDDL = %s\nwant %s", ddl, want)
	}
	if got := redactURL("postgres://gw:s3cret@db:5432/gw?sslmode=require"); strings.Contains(got, "s3cret") {
		t.Errorf("redactURL kept the password: %s", got)
	}
}
