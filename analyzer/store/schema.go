package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// migration is one numbered step of the schema: version i+1 is
// migrations[i]. A database records the last step it went through in
// schema_version; Open runs the steps after it, each in one transaction.
// Steps are never edited once released: a change is a new step.
type migration struct {
	why   string
	stmts []string
}

var migrations = []migration{
	{"the tables of the first, unversioned schema (each created if missing, so a database written before " +
		"schema_version existed goes through this step unchanged)", []string{
		// Analyzer usage intervals: a week's report is the sum of these.
		`CREATE TABLE IF NOT EXISTS usage (
			start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
			hostname TEXT NOT NULL, job TEXT NOT NULL, user TEXT NOT NULL, team TEXT NOT NULL,
			kind TEXT NOT NULL, model TEXT NOT NULL, gpus INTEGER NOT NULL,
			allocated_gpu_hours REAL NOT NULL, active_gpu_hours REAL NOT NULL,
			PRIMARY KEY (hostname, job, start_ms))`,
		`CREATE INDEX IF NOT EXISTS usage_time ON usage (start_ms)`,
		`CREATE TABLE IF NOT EXISTS findings (
			cycle_ms INTEGER NOT NULL, fkey TEXT NOT NULL, pattern TEXT NOT NULL, team TEXT NOT NULL,
			start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL, wasted_gpu_hours REAL NOT NULL,
			body TEXT NOT NULL, PRIMARY KEY (cycle_ms, fkey))`,
		`CREATE INDEX IF NOT EXISTS findings_time ON findings (end_ms)`,
		// FindingsBetween picks the newest cycle per key: without this index it
		// scans the table once per row (16 s instead of 0.3 s for a 10,000-GPU week).
		`CREATE INDEX IF NOT EXISTS findings_key_cycle ON findings (fkey, cycle_ms)`,
		// The engine's per-allocation state between cycles, and its cursor.
		`CREATE TABLE IF NOT EXISTS analyzer_allocations (
			akey TEXT PRIMARY KEY, last_step_ms INTEGER NOT NULL, body TEXT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS analyzer_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)`,
		// The report outbox: one row per report (kind, team, period). The
		// primary key is what makes a report unique across restarts: a row is
		// inserted once, and stays until delivered (sent_ms set), with its
		// attempts and last error.
		`CREATE TABLE IF NOT EXISTS report_outbox (
			kind TEXT NOT NULL, team TEXT NOT NULL, period TEXT NOT NULL,
			created_ms INTEGER NOT NULL, subject TEXT NOT NULL, message TEXT NOT NULL,
			attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
			last_attempt_ms INTEGER NOT NULL DEFAULT 0, sent_ms INTEGER NOT NULL DEFAULT 0,
			PRIMARY KEY (kind, team, period))`,
		`CREATE INDEX IF NOT EXISTS report_outbox_pending ON report_outbox (sent_ms, kind)`,
		// The audit log: each step's record, and every event of it.
		`CREATE TABLE IF NOT EXISTS actions (
			idem_key TEXT PRIMARY KEY, finding_key TEXT NOT NULL, episode_ms INTEGER NOT NULL,
			step TEXT NOT NULL, actuator TEXT NOT NULL, scheduler TEXT NOT NULL, hostname TEXT NOT NULL,
			job TEXT NOT NULL, user TEXT NOT NULL, team TEXT NOT NULL, pattern TEXT NOT NULL, tier TEXT NOT NULL,
			dry_run INTEGER NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL, detail TEXT NOT NULL,
			intended_ms INTEGER NOT NULL, finished_ms INTEGER NOT NULL, payload TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS actions_state ON actions (state)`,
		`CREATE TABLE IF NOT EXISTS audit_events (
			id INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, idem_key TEXT NOT NULL,
			step TEXT NOT NULL, actuator TEXT NOT NULL, hostname TEXT NOT NULL, job TEXT NOT NULL,
			user TEXT NOT NULL, team TEXT NOT NULL, pattern TEXT NOT NULL, tier TEXT NOT NULL,
			dry_run INTEGER NOT NULL, state TEXT NOT NULL, attempt INTEGER NOT NULL, detail TEXT NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS audit_events_time ON audit_events (at_ms)`,
		`CREATE TABLE IF NOT EXISTS escalations (
			finding_key TEXT PRIMARY KEY, first_seen_ms INTEGER NOT NULL, last_seen_ms INTEGER NOT NULL)`,
	}},
	{"reports read the action log through the store (ActionsBetween); the view an older report probed for goes", []string{
		`DROP VIEW IF EXISTS audit`,
	}},
	{"leases: one acting analyzer among several processes sharing the store (created on first use before versions)", []string{
		`CREATE TABLE IF NOT EXISTS leases (
			name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_ms INTEGER NOT NULL)`,
	}},
	{"fencing: a lease's generation, bumped whenever its holder changes, and the generation each step was " +
		"intended under; the audit is written only while its writer's generation is the lease's (lease.go)", []string{
		`ALTER TABLE leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 0`,
		`ALTER TABLE actions ADD COLUMN generation INTEGER NOT NULL DEFAULT 0`,
		// A new lease row starts above every generation the audit holds
		// (AcquireLease reads the maximum at each claim).
		`CREATE INDEX IF NOT EXISTS actions_generation ON actions (generation)`,
	}},
}

// SchemaVersion is the version Open brings a database to.
func SchemaVersion() int { return len(migrations) }

// Version returns the schema version the database is at: 0 for one
// written before versions were recorded (or empty).
func (s *Store) Version(ctx context.Context) (int, error) {
	return version(ctx, s.db)
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func version(ctx context.Context, db querier) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil && isNoSuchTable(err):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return n, nil
}

func isNoSuchTable(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "no such table") || // SQLite
		strings.Contains(err.Error(), "(SQLSTATE 42P01)")) // PostgreSQL: undefined_table
}

// migrator is the database or one connection of it.
type migrator interface {
	querier
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// migrationLock is the PostgreSQL advisory lock that keeps two replicas
// starting at once from migrating the shared database together.
const migrationLock = 0x67707577 // "gpuw"

// migrate brings the database to SchemaVersion, one step per transaction.
// A database newer than this build is refused rather than written.
func (s *Store) migrate(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var db migrator = s.db
	if s.postgres {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(?)`, migrationLock); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(?)`, migrationLock) //nolint:errcheck // closing the session frees it too
		db = conn
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	from, err := version(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if from > len(migrations) {
		return fmt.Errorf("migrate: the database is at schema version %d, newer than this gpuwatch knows (%d)", from, len(migrations))
	}
	for v := from + 1; v <= len(migrations); v++ {
		if err := s.step(ctx, db, v); err != nil {
			return fmt.Errorf("migrate to schema version %d (%s): %w", v, migrations[v-1].why, err)
		}
	}
	return nil
}

func (s *Store) step(ctx context.Context, db migrator, v int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for _, q := range migrations[v-1].stmts {
		if s.postgres {
			q = pgDDL(q)
		}
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM schema_version`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (?)`, v); err != nil {
		return err
	}
	return tx.Commit()
}
