// Package audit is the reclamation audit log and escalation state, kept in
// the analyzer's SQLite store. Every step is written as intended before it
// runs and as done, failed, skipped or dry-run after; a step's idempotency
// key (finding key, escalation episode, step) lets a restarted analyzer see
// exactly which steps are settled, which failed (and may be retried) and
// which were interrupted between the two writes (and must be reconciled with
// the scheduler before anything else is done).
//
// When several analyzers share the store, every write is fenced (FenceWith):
// made only while the writer's lease generation is still the lease's, so a
// leader that was paused past its lease cannot write an intent or a result.
package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
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
	// Generation is the store lease's generation the step was intended
	// under (0 for an analyzer without a shared lease).
	Generation int64 `json:"generation,omitempty"`
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
	// fencer, when set, gives the lease every write is checked against.
	fencer leader.Fencer
	// inFlight holds the steps this process intended and has not yet
	// finished: no reconcile touches them.
	inFlight map[string]bool
	// unwritten holds the outcomes of this process's steps whose Finish
	// failed (the store restarted, say): Rewrite writes them again.
	unwritten map[string]outcome
}

// outcome is a step's result kept in memory until it is written.
type outcome struct {
	state  State
	detail string
	at     time.Time
}

// Open returns the audit log of st (the store creates its tables).
func Open(ctx context.Context, st *store.Store) (*Log, error) {
	return &Log{db: st.DB(), inFlight: map[string]bool{}, unwritten: map[string]outcome{}}, nil
}

// FenceWith makes every write of the log (intents, results, episodes)
// conditional on f's lease: refused with store.ErrFenced once the lease's
// holder or generation is no longer the one f won. Without it (an analyzer
// alone on its store) nothing is compared.
func (l *Log) FenceWith(f leader.Fencer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fencer = f
}

// begin opens a write transaction that holds the fence first: on SQLite
// the write lock is taken before anything is read, and on PostgreSQL the
// lease row stays locked until the transaction ends. It returns the
// generation the write is made under. Called with l.mu held.
func (l *Log) begin(ctx context.Context) (*sql.Tx, int64, error) {
	f := leader.SoleFence()
	if l.fencer != nil {
		f = l.fencer.Fence()
	}
	if !f.Sole && f.Deadline.IsZero() {
		return nil, 0, fmt.Errorf("%w: this analyzer does not lead", store.ErrFenced)
	}
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, err
	}
	if f.Sole || f.Store.Lease == "" {
		return tx, 0, nil
	}
	if err := store.HoldFence(ctx, tx, f.Store); err != nil {
		_ = tx.Rollback()
		return nil, 0, err
	}
	return tx, f.Store.Generation, nil
}

const recordCols = `idem_key, finding_key, episode_ms, step, actuator, scheduler, hostname, job, user, team, pattern, tier,
	dry_run, state, attempts, detail, intended_ms, finished_ms, payload, generation`

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
		&r.Team, &r.Pattern, &r.Tier, &dry, &r.State, &r.Attempts, &r.Detail, &in, &fin, &r.Payload, &r.Generation)
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
// key with its attempt count raised. A fenced log writes the intent only
// under the lease's current generation (store.ErrFenced otherwise), and
// records that generation with it.
func (l *Log) Intend(ctx context.Context, r Record, at time.Time) (Record, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, fresh, err := l.intend(ctx, r, at)
	if err != nil {
		return Record{}, false, fmt.Errorf("audit intend %s: %w", r.Key, err)
	}
	if fresh {
		l.inFlight[r.Key] = true
	}
	return r, fresh, nil
}

func (l *Log) intend(ctx context.Context, r Record, at time.Time) (Record, bool, error) {
	tx, gen, err := l.begin(ctx)
	if err != nil {
		return r, false, err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	old, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, r.Key))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		r.Attempts = 1
	case err != nil:
		return r, false, err
	case old.State != Failed:
		return old, false, nil
	default:
		r.Attempts = old.Attempts + 1
	}
	r.State, r.Intended, r.Finished, r.Generation = Intended, at.UTC(), time.Time{}, gen
	redact(&r)
	res, err := tx.ExecContext(ctx, `INSERT INTO actions (`+recordCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`+recordRetry,
		r.Key, r.FindingKey, r.Episode.UnixMilli(), r.Step, r.Actuator, r.Scheduler, r.Hostname, r.Job, r.User,
		r.Team, r.Pattern, r.Tier, b2i(r.DryRun), string(r.State), r.Attempts, r.Detail, r.Intended.UnixMilli(), 0, r.Payload,
		r.Generation, r.Attempts-1)
	if err != nil {
		return r, false, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return r, false, err
	} else if n != 1 {
		// Another analyzer intended it between our read and our write.
		if err := tx.Rollback(); err != nil {
			return r, false, err
		}
		cur, err := scanRecord(l.db.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, r.Key))
		return cur, false, err
	}
	if err := addEvent(ctx, tx, &r, at); err != nil {
		return r, false, err
	}
	return r, true, tx.Commit()
}

// errNotIntended: Finish found the step already settled (by a reconcile,
// or by an earlier write whose acknowledgement was lost).
var errNotIntended = errors.New("not intended")

// Finish records the outcome of an intended step. When the write fails for
// any reason but a fence, the outcome is kept in memory, and Rewrite writes
// it on this process's next cycle, so that the step does not wait for
// another analyzer's reconcile.
func (l *Log) Finish(ctx context.Context, key string, state State, detail string, at time.Time) error {
	if state == Intended {
		return fmt.Errorf("audit finish %s: %q is not an outcome", key, state)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.inFlight, key)
	err := l.finish(ctx, key, state, detail, at)
	switch {
	case err == nil || errors.Is(err, errNotIntended) || errors.Is(err, store.ErrFenced):
		// Written, settled already, or no longer ours to write: the leader
		// that holds the lease reconciles it.
		delete(l.unwritten, key)
	default:
		l.unwritten[key] = outcome{state: state, detail: detail, at: at}
	}
	if err != nil {
		return fmt.Errorf("audit finish %s: %w", key, err)
	}
	return nil
}

func (l *Log) finish(ctx context.Context, key string, state State, detail string, at time.Time) error {
	tx, _, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	r, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordCols+` FROM actions WHERE idem_key = ?`, key))
	if err != nil {
		return err
	}
	if r.State != Intended {
		return fmt.Errorf("step is %s, %w", r.State, errNotIntended)
	}
	// A step's detail is often an error from someone else's system (a
	// Hub's body, a scheduler's message): no credential is ever stored.
	r.State, r.Detail, r.Finished = state, redactText(detail), at.UTC()
	res, err := tx.ExecContext(ctx, `UPDATE actions SET state = ?, detail = ?, finished_ms = ? WHERE idem_key = ? AND state = ?`,
		string(state), r.Detail, at.UnixMilli(), key, string(Intended))
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return fmt.Errorf("step settled meanwhile: %w", errNotIntended)
	}
	if err := addEvent(ctx, tx, &r, at); err != nil {
		return err
	}
	return tx.Commit()
}

// Rewrite writes again the outcomes of this process's steps whose Finish
// failed, each with its own time, and returns how many it wrote. One that
// another analyzer settled meanwhile, or that the lease no longer lets
// this process write, is dropped; one that fails again is kept, and the
// error returned.
func (l *Log) Rewrite(ctx context.Context) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.unwritten))
	for k := range l.unwritten {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n := 0
	for _, k := range keys {
		o := l.unwritten[k]
		err := l.finish(ctx, k, o.state, o.detail, o.at)
		switch {
		case err == nil:
			n++
			delete(l.unwritten, k)
		case errors.Is(err, errNotIntended) || errors.Is(err, store.ErrFenced):
			delete(l.unwritten, k)
		default:
			return n, fmt.Errorf("audit rewrite %s: %w", k, err)
		}
	}
	return n, nil
}

// Interrupted returns the steps left intended that this process neither
// has in flight nor holds an unwritten outcome of: those of a process that
// stopped between its two writes (an older lease generation), and this
// process's own whose intent was written though Intend reported an error.
// They are reconciled with their targets.
func (l *Log) Interrupted(ctx context.Context) ([]Record, error) {
	pending, err := l.Pending(ctx)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := pending[:0]
	for _, r := range pending {
		if _, unwritten := l.unwritten[r.Key]; !l.inFlight[r.Key] && !unwritten {
			out = append(out, r)
		}
	}
	return out, nil
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
	var first int64
	err := l.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO escalations VALUES (?,?,?)
			ON CONFLICT (finding_key) DO UPDATE SET last_seen_ms = excluded.last_seen_ms`,
			findingKey, now.UnixMilli(), now.UnixMilli()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT first_seen_ms FROM escalations WHERE finding_key = ?`, findingKey).Scan(&first)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("audit observe %s: %w", findingKey, err)
	}
	return time.UnixMilli(first).UTC(), nil
}

// KeepEpisode keeps the open escalation of a finding whose data is missing
// for now from ending at this cycle, without starting one: a gap pauses an
// episode, and a user warned before an exporter restart is not warned again
// from the first step after it.
func (l *Log) KeepEpisode(ctx context.Context, findingKey string, now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE escalations SET last_seen_ms = ? WHERE finding_key = ?`, now.UnixMilli(), findingKey)
		return err
	})
	if err != nil {
		return fmt.Errorf("audit keep episode %s: %w", findingKey, err)
	}
	return nil
}

// EndEpisodes ends the escalation of every finding not seen at now: a job
// that became busy again starts from the first step if it idles again.
func (l *Log) EndEpisodes(ctx context.Context, now time.Time) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	err := l.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM escalations WHERE last_seen_ms < ?`, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("audit end episodes: %w", err)
	}
	return n, nil
}

// write runs fn in one fenced transaction. Called with l.mu held.
func (l *Log) write(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, _, err := l.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
