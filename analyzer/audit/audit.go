// Package audit is the reclamation audit log and escalation state, kept in
// the analyzer's SQLite store. Every step is written as intended before it
// runs and as done, failed, skipped or dry-run after; a step's idempotency
// key (finding key, escalation episode, step) lets a restarted analyzer see
// exactly which steps are settled, which failed (and may be retried) and
// which were interrupted between the two writes (and must be reconciled with
// the scheduler before anything else is done).
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// State of a step.
type State string

const (
	Intended State = "intended" // written before the step runs
	Done     State = "done"
	Failed   State = "failed" // may be retried by a later cycle
	Skipped  State = "skipped"
	DryRun   State = "dry_run" // what would have been done
)

// Settled reports whether a step in this state is never run again.
func (s State) Settled() bool { return s == Done || s == Skipped || s == DryRun }

// Record is the current state of one step.
type Record struct {
	Key        string    `json:"key"`
	FindingKey string    `json:"finding_key"`
	Episode    time.Time `json:"episode"`
	Step       string    `json:"step"`
	Actuator   string    `json:"actuator"`
	Scheduler  string    `json:"scheduler,omitempty"`
	Hostname   string    `json:"hostname"`
	Job        string    `json:"job"`
	User       string    `json:"user"`
	Team       string    `json:"team"`
	Pattern    string    `json:"pattern"`
	Tier       string    `json:"tier"`
	DryRun     bool      `json:"dry_run"`
	State      State     `json:"state"`
	Attempts   int       `json:"attempts"`
	Detail     string    `json:"detail,omitempty"`
	Intended   time.Time `json:"intended"`
	Finished   time.Time `json:"finished,omitzero"`
	// Payload is the actuator's request (JSON), kept so that a restart can
	// reconcile an interrupted step with its target.
	Payload string `json:"-"`
}

// Event is one line of the audit log.
type Event struct {
	ID       int64     `json:"id"`
	At       time.Time `json:"at"`
	Key      string    `json:"key"`
	Step     string    `json:"step"`
	Actuator string    `json:"actuator"`
	Hostname string    `json:"hostname"`
	Job      string    `json:"job"`
	User     string    `json:"user"`
	Team     string    `json:"team"`
	Pattern  string    `json:"pattern"`
	Tier     string    `json:"tier"`
	DryRun   bool      `json:"dry_run"`
	State    State     `json:"state"`
	Attempt  int       `json:"attempt"`
	Detail   string    `json:"detail,omitempty"`
}

// Key is the idempotency key of one step of one escalation episode.
func Key(findingKey string, episode time.Time, step string) string {
	return findingKey + "|" + strconv.FormatInt(episode.UnixMilli(), 10) + "|" + step
}

// Log is the audit log.
type Log struct {
	db *sql.DB
	mu sync.Mutex
}

// Open returns the audit log of st (the store creates its tables).
func Open(ctx context.Context, st *store.Store) (*Log, error) {
	return &Log{db: st.DB()}, nil
}

const recordCols = `idem_key, finding_key, episode_ms, step, actuator, scheduler, hostname, job, user, team, pattern, tier,
	dry_run, state, attempts, detail, intended_ms, finished_ms, payload`

// recordRetry is the end of Intend's insert: a record already there is
// replaced only while it is still the failed attempt the caller read. It is
// the compare-and-set that keeps two analyzers on one shared database
// (PostgreSQL's read-committed transactions do not serialize the read
// before it) from both running a step; SQLite and PostgreSQL both read it.
var recordRetry = func() string {
	var set []string
	for _, c := range strings.Split(recordCols, ",") {
		if c = strings.TrimSpace(c); c != "idem_key" {
			set = append(set, c+" = excluded."+c)
		}
	}
	return " ON CONFLICT (idem_key) DO UPDATE SET " + strings.Join(set, ", ") +
		" WHERE actions.state = '" + string(Failed) + "' AND actions.attempts = ?"
}()

type scanner interface{ Scan(...any) error }

func scanRecord(s scanner) (Record, error) {
	var r Record
	var ep, in, fin int64
	var dry int
	err := s.Scan(&r.Key, &r.FindingKey, &ep, &r.Step, &r.Actuator, &r.Scheduler, &r.Hostname, &r.Job, &r.User,
		&r.Team, &r.Pattern, &r.Tier, &dry, &r.State, &r.Attempts, &r.Detail, &in, &fin, &r.Payload)
	r.Episode, r.Intended, r.DryRun = time.UnixMilli(ep).UTC(), time.UnixMilli(in).UTC(), dry != 0
	if fin != 0 {
		r.Finished = time.UnixMilli(fin).UTC()
	}
	return r, err
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func addEvent(ctx context.Context, tx *sql.Tx, r *Record, at time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_events (at_ms, idem_key, step, actuator, hostname, job, user, team,
		pattern, tier, dry_run, state, attempt, detail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		at.UnixMilli(), r.Key, r.Step, r.Actuator, r.Hostname, r.Job, r.User, r.Team, r.Pattern, r.Tier,
		b2i(r.DryRun), string(r.State), r.Attempts, r.Detail)
	return err
}

// Intend writes r as intended at time at, unless its key is already settled
// or already intended: then it returns the existing record and false, and
// the caller must not run the step. A failed step is retried under the same
// key with its attempt count raised.
func (l *Log) Intend(ctx context.Context, r Record, at time.Time) (Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	old, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, r.Key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		r.Attempts = 1
	case err != nil:
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	case old.State != Failed:
		return old, false, nil
	default:
		r.Attempts = old.Attempts + 1
	}
	r.State, r.Intended, r.Finished = Intended, at.UTC(), time.Time{}
	redact(&r)
	res, err := tx.ExecContext(ctx, `INSERT INTO actions (`+recordCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`+recordRetry,
		r.Key, r.FindingKey, r.Episode.UnixMilli(), r.Step, r.Actuator, r.Scheduler, r.Hostname, r.Job, r.User,
		r.Team, r.Pattern, r.Tier, b2i(r.DryRun), string(r.State), r.Attempts, r.Detail, r.Intended.UnixMilli(), 0, r.Payload,
		r.Attempts-1)
	if err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	} else if n != 1 {
		// Another analyzer intended it between our read and our write.
		if err := tx.Rollback(); err != nil {
			return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
		}
		cur, err := scanRecord(l.db.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, r.Key))
		if err != nil {
			return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
		}
		return cur, false, nil
	}
	if err := addEvent(ctx, tx, &r, at); err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	}
	if err := tx.Commit(); err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	}
	return r, true, nil
}

// Finish records the outcome of an intended step.
func (l *Log) Finish(ctx context.Context, key string, state State, detail string, at time.Time) error {
	if state == Intended {
		return fmt.Errorf("audit finish %s: %q is not an outcome", key, state)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	r, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, key))
	if err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	if r.State != Intended {
		return fmt.Errorf("audit finish %s: step is %s, not intended", key, r.State)
	}
	// A step's detail is often an error from someone else's system (a
	// Hub's body, a scheduler's message): no credential is ever stored.
	r.State, r.Detail, r.Finished = state, redactText(detail), at.UTC()
	if _, err := tx.ExecContext(ctx, `UPDATE actions SET state = ?, detail = ?, finished_ms = ? WHERE idem_key = ?`,
		string(state), r.Detail, at.UnixMilli(), key); err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	if err := addEvent(ctx, tx, &r, at); err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	return nil
}

// Get returns the record of key.
func (l *Log) Get(ctx context.Context, key string) (Record, bool, error) {
	r, err := scanRecord(l.db.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("audit get %s: %w", key, err)
	}
	return r, true, nil
}

// Pending returns the steps written as intended with no outcome: after a
// crash, these must be reconciled before anything else runs.
func (l *Log) Pending(ctx context.Context) ([]Record, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT `+recordCols+` FROM actions WHERE state = ? ORDER BY intended_ms, idem_key`, string(Intended))
	if err != nil {
		return nil, fmt.Errorf("audit pending: %w", err)
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("audit pending: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// RealAttemptsSince counts the non-dry-run attempts of step since t; rate
// limits count attempts, so a failing reclaim cannot be retried past them.
func (l *Log) RealAttemptsSince(ctx context.Context, step string, t time.Time) (int, error) {
	var n int
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_events WHERE step = ? AND state = ? AND dry_run = 0 AND at_ms >= ?`,
		step, string(Intended), t.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("audit count %s: %w", step, err)
	}
	return n, nil
}

// History returns the records of one escalation episode of findingKey, and
// the steps taken or in flight for the same job since its allocation began
// under any other finding or episode: what a plan needs, in one read.
// Dry-run and real steps are told apart by their DryRun field.
func (l *Log) History(ctx context.Context, findingKey string, episode time.Time, scheduler, job string, since time.Time) (own, jobs []Record, err error) {
	own, err = l.records(ctx, `SELECT `+recordCols+` FROM actions WHERE finding_key = ? AND episode_ms = ? ORDER BY idem_key`,
		findingKey, episode.UnixMilli())
	if err != nil {
		return nil, nil, fmt.Errorf("audit history %s: %w", findingKey, err)
	}
	all, err := l.records(ctx, `SELECT `+recordCols+` FROM actions WHERE scheduler = ? AND job = ? AND state IN (?, ?, ?)
		AND intended_ms >= ? ORDER BY idem_key`, scheduler, job, string(Intended), string(Done), string(DryRun), since.UnixMilli())
	if err != nil {
		return nil, nil, fmt.Errorf("audit history of job %s: %w", job, err)
	}
	for _, r := range all {
		if r.FindingKey != findingKey || !r.Episode.Equal(episode) {
			jobs = append(jobs, r)
		}
	}
	return own, jobs, nil
}

// Latest returns the newest record (by episode) of step for findingKey in
// the given dry-run mode, if any: a node's last drain, say.
func (l *Log) Latest(ctx context.Context, findingKey, step string, dryRun bool) (Record, bool, error) {
	rs, err := l.records(ctx, `SELECT `+recordCols+` FROM actions WHERE finding_key = ? AND step = ? AND dry_run = ?
		ORDER BY episode_ms DESC, intended_ms DESC LIMIT 1`, findingKey, step, b2i(dryRun))
	if err != nil {
		return Record{}, false, fmt.Errorf("audit latest %s: %w", findingKey, err)
	}
	if len(rs) == 0 {
		return Record{}, false, nil
	}
	return rs[0], true, nil
}

func (l *Log) records(ctx context.Context, q string, args ...any) ([]Record, error) {
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Filter selects audit events.
type Filter struct {
	Since time.Time
	Job   string
	Limit int
}

// Events returns audit events in order, oldest first.
func (l *Log) Events(ctx context.Context, f Filter) ([]Event, error) {
	q := `SELECT id, at_ms, idem_key, step, actuator, hostname, job, user, team, pattern, tier, dry_run, state, attempt, detail
		FROM audit_events WHERE at_ms >= ?`
	args := []any{f.Since.UnixMilli()}
	if f.Job != "" {
		q += ` AND job = ?`
		args = append(args, f.Job)
	}
	if f.Limit > 0 {
		// The newest Limit events, still listed oldest first.
		q = `SELECT * FROM (` + q + ` ORDER BY id DESC LIMIT ?) AS newest ORDER BY id`
		args = append(args, f.Limit)
	} else {
		q += ` ORDER BY id`
	}
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("audit events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		var dry int
		if err := rows.Scan(&e.ID, &at, &e.Key, &e.Step, &e.Actuator, &e.Hostname, &e.Job, &e.User, &e.Team,
			&e.Pattern, &e.Tier, &dry, &e.State, &e.Attempt, &e.Detail); err != nil {
			return nil, fmt.Errorf("audit events: %w", err)
		}
		e.At, e.DryRun = time.UnixMilli(at).UTC(), dry != 0
		out = append(out, e)
	}
	return out, rows.Err()
}

// Observe notes that findingKey was seen at now and returns when its
// escalation episode began (now, for a new one).
func (l *Log) Observe(ctx context.Context, findingKey string, now time.Time) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.db.ExecContext(ctx, `INSERT INTO escalations VALUES (?,?,?)
		ON CONFLICT (finding_key) DO UPDATE SET last_seen_ms = excluded.last_seen_ms`,
		findingKey, now.UnixMilli(), now.UnixMilli()); err != nil {
		return time.Time{}, fmt.Errorf("audit observe %s: %w", findingKey, err)
	}
	var first int64
	if err := l.db.QueryRowContext(ctx, `SELECT first_seen_ms FROM escalations WHERE finding_key = ?`, findingKey).Scan(&first); err != nil {
		return time.Time{}, fmt.Errorf("audit observe %s: %w", findingKey, err)
	}
	return time.UnixMilli(first).UTC(), nil
}

// EndEpisodes ends the escalation of every finding not seen at now: a job
// that became busy again starts from the first step if it idles again.
func (l *Log) EndEpisodes(ctx context.Context, now time.Time) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res, err := l.db.ExecContext(ctx, `DELETE FROM escalations WHERE last_seen_ms < ?`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("audit end episodes: %w", err)
	}
	return res.RowsAffected()
}
