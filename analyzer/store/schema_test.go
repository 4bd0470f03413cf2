package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unversioned is the schema as databases written before schema_version
// have it: each package created its own tables, the audit log a view for
// the reports' table probe, and the lease code its table on first use.
var unversioned = append(append([]string{}, migrations[0].stmts...),
	`CREATE VIEW IF NOT EXISTS audit AS SELECT at_ms, step AS action, pattern, team, user, job,
		state AS outcome, dry_run FROM audit_events WHERE state != 'intended'`,
	`CREATE TABLE IF NOT EXISTS leases (
		name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms INTEGER NOT NULL)`)

func rawDB(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func objects(t *testing.T, s *Store) map[string]string {
	t.Helper()
	rows, err := s.DB().Query(`SELECT name, type FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			t.Fatal(err)
		}
		out[n] = ty
	}
	return out
}

// A database from every past schema version, the unversioned one
// included, opens at the current version with its rows kept, and ends with
// exactly the tables and indexes of a new database.
func TestMigrateFromEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fresh, err := Open(filepath.Join(t.TempDir(), "fresh.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	want := objects(t, fresh)
	if _, ok := want["audit"]; ok {
		t.Fatal("a new database has the old audit view")
	}
	at := time.UnixMilli(1795330800000).UTC()
	for from := 0; from < SchemaVersion(); from++ {
		path := filepath.Join(t.TempDir(), "old.db")
		if from == 0 {
			rawDB(t, path, unversioned...)
		} else {
			var stmts []string
			for _, m := range migrations[:from] {
				stmts = append(stmts, m.stmts...)
			}
			stmts = append(stmts, `CREATE TABLE schema_version (version INTEGER NOT NULL)`,
				`INSERT INTO schema_version VALUES (`+strconv.Itoa(from)+`)`)
			rawDB(t, path, stmts...)
		}
		rawDB(t, path,
			`INSERT INTO usage VALUES (1795330800000, 1795331100000, 'h1', '42', 'ann', 'ml', 'batch', 'H100', 2, 0.16, 0.08)`,
			`INSERT INTO audit_events (at_ms, idem_key, step, actuator, hostname, job, user, team, pattern, tier, dry_run, state, attempt, detail)
				VALUES (1795330800000, 'k', 'warn', 'slurm', 'h1', '42', 'ann', 'ml', 'cpu_only', 'dev', 1, 'dry_run', 1, '')`)
		s, err := Open(path)
		if err != nil {
			t.Fatalf("from version %d: %v", from, err)
		}
		if v, err := s.Version(ctx); err != nil || v != SchemaVersion() {
			t.Errorf("from version %d: at %d (%v), want %d", from, v, err, SchemaVersion())
		}
		got := objects(t, s)
		for n, ty := range want {
			if got[n] != ty {
				t.Errorf("from version %d: %s is %q, want %q", from, n, got[n], ty)
			}
		}
		for n := range got {
			if _, ok := want[n]; !ok {
				t.Errorf("from version %d: %s left behind", from, n)
			}
		}
		us, err := s.UsageBetween(ctx, at.Add(-time.Hour), at.Add(time.Hour))
		if err != nil || len(us) != 1 || us[0].Job != "42" {
			t.Errorf("from version %d: usage %+v, %v", from, us, err)
		}
		as, err := s.ActionsBetween(ctx, at.Add(-time.Hour), at.Add(time.Hour))
		if err != nil || len(as) != 1 || as[0].Step != "warn" || !as[0].DryRun || as[0].State != "dry_run" {
			t.Errorf("from version %d: actions %+v, %v", from, as, err)
		}
		s.Close()
		// Opening again runs nothing more.
		if s, err = Open(path); err != nil {
			t.Fatalf("from version %d, reopened: %v", from, err)
		}
		s.Close()
	}
}

// A database written by a newer gpuwatch is refused, not written.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	rawDB(t, path, `CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (999)`)
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a version-999 database: %v", err)
	}
}
