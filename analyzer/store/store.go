// Package store is gpuwatch's embedded state: one SQLite file (pure Go,
// modernc.org/sqlite, WAL) shared by the analyzer (allocation state, usage
// intervals, findings), the actions (audit log) and the reports (what was
// sent). It owns every table: schema.go creates and migrates them, and the
// packages that write them read and write through the store's database.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// Store is an open state database.
type Store struct {
	db       *sql.DB
	mu       sync.Mutex
	readOnly bool
	// postgres: the database is PostgreSQL (postgres.go), shared by replicas.
	postgres bool
}

// FileMode is the mode of a database file the store creates: it holds the
// audit log, users and mail recipients, so only its owner reads it. SQLite
// gives the -wal and -shm files the database file's mode.
const FileMode = 0o600

// Open opens (creating if needed) the database at path. ":memory:" gives a
// private in-memory database, for tests.
func Open(path string) (*Store, error) {
	if path != ":memory:" {
		if err := createPrivate(path); err != nil {
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
	}
	return open(path, dsn(path, "rwc", "journal_mode(WAL)", "busy_timeout(5000)", "foreign_keys(1)", "synchronous(NORMAL)"), false)
}

// OpenReadOnly opens an existing database for reading only (audit, report
// previews): it creates nothing and runs no migration. A WAL database needs
// its -shm file to be writable, or to exist; when neither holds (a reader
// without write access to the folder, the analyzer stopped) the file is read
// as immutable, which sees what was last checkpointed.
func OpenReadOnly(path string) (*Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open store %s read-only: %w", path, err)
	}
	s, err := open(path, dsn(path, "ro", "busy_timeout(5000)", "query_only(1)"), true)
	if err == nil {
		return s, nil
	}
	s, err2 := open(path, dsn(path, "ro", "query_only(1)")+"&immutable=1", true)
	if err2 != nil {
		return nil, err
	}
	return s, nil
}

func open(path, dsn string, readOnly bool) (*Store, error) {
	if path == ":memory:" {
		dsn = "file::memory:?_pragma=busy_timeout(5000)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// SQLite has one writer; one connection keeps in-memory databases whole
	// and avoids SQLITE_BUSY between our own goroutines.
	db.SetMaxOpenConns(1)
	s := &Store{db: db, readOnly: readOnly}
	if readOnly {
		if err := db.Ping(); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s read-only: %w", path, err)
		}
		return s, nil
	}
	if err := s.migrate(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

// dsn builds the SQLite URI of a file path. The path is percent-encoded:
// pasted in raw, "a#b.db" would open "a" (the rest read as a fragment) and
// "c?d.db" would open "c" with "d.db" as a parameter, dropping WAL and the
// busy timeout.
func dsn(path, mode string, pragmas ...string) string {
	q := url.Values{"mode": {mode}}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	u := url.URL{Scheme: "file", Opaque: escapePath(path), RawQuery: q.Encode()}
	return u.String()
}

// escapePath percent-encodes what a SQLite URI path may not hold raw.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c == '/' || c == '.' || c == '-' || c == '_' || c == '~' ||
			'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// createPrivate creates the database file with FileMode when it is missing,
// and takes world access away from an existing one (a group the operator
// chose, for auditors, is kept).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file")
	}
	if st.Mode().Perm()&0o007 != 0 {
		return f.Chmod(st.Mode().Perm() &^ 0o007)
	}
	return nil
}

// DB exposes the database to the packages that own further tables.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Postgres reports whether the store is a PostgreSQL database (one that
// replicas share) rather than a SQLite file.
func (s *Store) Postgres() bool { return s.postgres }

// Usage is one allocation's use of its GPUs over one analyzer interval.
// A week's report is the sum of these, not a re-read of raw samples.
type Usage struct {
	Start, End time.Time
	Hostname   string
	Job        string
	User       string
	Team       string
	Kind       string
	Model      string
	GPUs       int
	// AllocatedGPUHours = GPUs × interval hours; ActiveGPUHours is the part
	// of it with GPU activity.
	AllocatedGPUHours float64
	ActiveGPUHours    float64
}

// AddUsage records usage intervals; re-recording the same interval
// (host, job, start) replaces it, so a repeated cycle never double counts.
func (s *Store) AddUsage(ctx context.Context, us []Usage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	st, err := tx.PrepareContext(ctx, `INSERT INTO usage VALUES (?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT (hostname, job, start_ms) DO UPDATE SET end_ms = excluded.end_ms, user = excluded.user,
		team = excluded.team, kind = excluded.kind, model = excluded.model, gpus = excluded.gpus,
		allocated_gpu_hours = excluded.allocated_gpu_hours, active_gpu_hours = excluded.active_gpu_hours`)
	if err != nil {
		return fmt.Errorf("add usage: %w", err)
	}
	defer st.Close()
	for _, u := range us {
		if _, err := st.ExecContext(ctx, u.Start.UnixMilli(), u.End.UnixMilli(), u.Hostname, u.Job, u.User, u.Team,
			u.Kind, u.Model, u.GPUs, u.AllocatedGPUHours, u.ActiveGPUHours); err != nil {
			return fmt.Errorf("add usage %s/%s: %w", u.Hostname, u.Job, err)
		}
	}
	return tx.Commit()
}

// UsageBetween returns the intervals that start in [from, to).
func (s *Store) UsageBetween(ctx context.Context, from, to time.Time) ([]Usage, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT start_ms, end_ms, hostname, job, user, team, kind, model, gpus,
		allocated_gpu_hours, active_gpu_hours FROM usage WHERE start_ms >= ? AND start_ms < ? ORDER BY start_ms, hostname, job`,
		from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read usage: %w", err)
	}
	defer rows.Close()
	var out []Usage
	for rows.Next() {
		var u Usage
		var s0, e0 int64
		if err := rows.Scan(&s0, &e0, &u.Hostname, &u.Job, &u.User, &u.Team, &u.Kind, &u.Model, &u.GPUs,
			&u.AllocatedGPUHours, &u.ActiveGPUHours); err != nil {
			return nil, fmt.Errorf("read usage: %w", err)
		}
		u.Start, u.End = time.UnixMilli(s0).UTC(), time.UnixMilli(e0).UTC()
		out = append(out, u)
	}
	return out, rows.Err()
}

// SaveFindings records the findings of one cycle. Findings of the same key
// in later cycles supersede earlier ones in FindingsBetween.
func (s *Store) SaveFindings(ctx context.Context, cycle time.Time, fs []finding.Finding) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save findings: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for i := range fs {
		f := &fs[i]
		body, err := json.Marshal(f)
		if err != nil {
			return fmt.Errorf("save finding %s: %w", f.Key(), err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO findings VALUES (?,?,?,?,?,?,?,?)
			ON CONFLICT (cycle_ms, fkey) DO UPDATE SET pattern = excluded.pattern, team = excluded.team,
			start_ms = excluded.start_ms, end_ms = excluded.end_ms, wasted_gpu_hours = excluded.wasted_gpu_hours,
			body = excluded.body`,
			cycle.UnixMilli(), f.Key(), string(f.Pattern), f.Team, f.Start.UnixMilli(), f.End.UnixMilli(), f.WastedGPUHours, string(body)); err != nil {
			return fmt.Errorf("save finding %s: %w", f.Key(), err)
		}
	}
	return tx.Commit()
}

// WithdrawFindings forgets what cycles since each given time recorded under
// a finding key: a verdict the analyzer withdrew is no finding, in the
// reports as on the web page.
func (s *Store) WithdrawFindings(ctx context.Context, since map[string]time.Time) error {
	if len(since) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("withdraw findings: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for k, t := range since {
		if _, err := tx.ExecContext(ctx, `DELETE FROM findings WHERE fkey = ? AND cycle_ms >= ?`, k, t.UnixMilli()); err != nil {
			return fmt.Errorf("withdraw finding %s: %w", k, err)
		}
	}
	return tx.Commit()
}

// FindingsBetween returns, for each finding key, the newest finding recorded
// by a cycle in [from, to).
func (s *Store) FindingsBetween(ctx context.Context, from, to time.Time) ([]finding.Finding, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM findings f WHERE cycle_ms >= ? AND cycle_ms < ?
		AND cycle_ms = (SELECT MAX(cycle_ms) FROM findings g WHERE g.fkey = f.fkey AND g.cycle_ms >= ? AND g.cycle_ms < ?)
		ORDER BY wasted_gpu_hours DESC, fkey`, from.UnixMilli(), to.UnixMilli(), from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read findings: %w", err)
	}
	defer rows.Close()
	var out []finding.Finding
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("read findings: %w", err)
		}
		var f finding.Finding
		if err := json.Unmarshal([]byte(body), &f); err != nil {
			return nil, fmt.Errorf("decode finding: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
