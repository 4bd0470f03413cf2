package report

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// Kinds of report in the outbox.
const (
	KindTeamWeekly  = "team_weekly"
	KindFleetWeekly = "fleet_weekly"
	KindFleetDaily  = "fleet_daily"
	// KindJobEnd is the end-of-job mail to a job's owner: its Team holds
	// the user, its Period hostname/job.
	KindJobEnd = "job_end"
)

// Outbox records the reports due and delivered.
type Outbox struct {
	db *sql.DB
	// Guard checks leadership right before each send (nil: a sole
	// analyzer).
	Guard *leader.Guard
}

// OpenOutbox returns the outbox of st (the store creates its table).
func OpenOutbox(ctx context.Context, st *store.Store) (*Outbox, error) {
	return &Outbox{db: st.DB()}, nil
}

// Entry is one report in the outbox.
type Entry struct {
	Kind, Team, Period string
	Created            time.Time
	Subject            string
	Message            mail.Message
	Attempts           int
	LastError          string
	LastAttempt        time.Time
	Sent               time.Time // zero while pending
}

// Has reports whether (kind, team, period) was ever enqueued.
func (o *Outbox) Has(ctx context.Context, kind, team, period string) (bool, error) {
	var n int
	err := o.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM report_outbox WHERE kind=? AND team=? AND period=?`, kind, team, period).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("report outbox: %w", err)
	}
	return n > 0, nil
}

// Enqueue stores a report unless one for (kind, team, period) exists; it
// returns whether it was added.
func (o *Outbox) Enqueue(ctx context.Context, e Entry) (bool, error) {
	body, err := json.Marshal(e.Message)
	if err != nil {
		return false, fmt.Errorf("report outbox: encode %s/%s/%s: %w", e.Kind, e.Team, e.Period, err)
	}
	res, err := o.db.ExecContext(ctx, `INSERT INTO report_outbox (kind, team, period, created_ms, subject, message) VALUES (?,?,?,?,?,?)
		ON CONFLICT DO NOTHING`,
		e.Kind, e.Team, e.Period, e.Created.UnixMilli(), e.Subject, string(body))
	if err != nil {
		return false, fmt.Errorf("report outbox: enqueue %s/%s/%s: %w", e.Kind, e.Team, e.Period, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("report outbox: %w", err)
	}
	return n == 1, nil
}

// Skip records that (kind, team, period) needs no report, so that it is
// neither built again nor sent.
func (o *Outbox) Skip(ctx context.Context, kind, team, period string, at time.Time, why string) error {
	_, err := o.db.ExecContext(ctx, `INSERT INTO report_outbox (kind, team, period, created_ms, subject, message, sent_ms)
		VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`, kind, team, period, at.UnixMilli(), "skipped: "+why, "{}", at.UnixMilli())
	if err != nil {
		return fmt.Errorf("report outbox: skip %s/%s/%s: %w", kind, team, period, err)
	}
	return nil
}

// Pending lists undelivered reports of the given kinds, oldest first.
func (o *Outbox) Pending(ctx context.Context, kinds ...string) ([]Entry, error) {
	return o.list(ctx, true, kinds)
}

// All lists every report of the given kinds (all kinds when none given).
func (o *Outbox) All(ctx context.Context, kinds ...string) ([]Entry, error) {
	return o.list(ctx, false, kinds)
}

func (o *Outbox) list(ctx context.Context, pendingOnly bool, kinds []string) ([]Entry, error) {
	q := `SELECT kind, team, period, created_ms, subject, message, attempts, last_error, last_attempt_ms, sent_ms FROM report_outbox`
	if pendingOnly {
		q += ` WHERE sent_ms = 0`
	}
	q += ` ORDER BY created_ms, kind, team, period`
	rows, err := o.db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("report outbox: %w", err)
	}
	defer rows.Close()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	var out []Entry
	for rows.Next() {
		var e Entry
		var created, last, sent int64
		var body string
		if err := rows.Scan(&e.Kind, &e.Team, &e.Period, &created, &e.Subject, &body, &e.Attempts, &e.LastError, &last, &sent); err != nil {
			return nil, fmt.Errorf("report outbox: %w", err)
		}
		if len(want) > 0 && !want[e.Kind] {
			continue
		}
		if err := json.Unmarshal([]byte(body), &e.Message); err != nil {
			return nil, fmt.Errorf("report outbox: decode %s/%s/%s: %w", e.Kind, e.Team, e.Period, err)
		}
		e.Created = time.UnixMilli(created).UTC()
		if last > 0 {
			e.LastAttempt = time.UnixMilli(last).UTC()
		}
		if sent > 0 {
			e.Sent = time.UnixMilli(sent).UTC()
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// MarkSent records a delivery.
func (o *Outbox) MarkSent(ctx context.Context, e Entry, at time.Time) error {
	// The body (charts included, ~100 kB) is dropped once delivered: the
	// row alone keeps the report from being sent twice.
	_, err := o.db.ExecContext(ctx, `UPDATE report_outbox SET sent_ms=?, attempts=attempts+1, last_attempt_ms=?, last_error='', message='{}'
		WHERE kind=? AND team=? AND period=?`,
		at.UnixMilli(), at.UnixMilli(), e.Kind, e.Team, e.Period)
	if err != nil {
		return fmt.Errorf("report outbox: mark %s/%s/%s sent: %w", e.Kind, e.Team, e.Period, err)
	}
	return nil
}

// MarkFailed records a failed attempt; the report stays pending.
func (o *Outbox) MarkFailed(ctx context.Context, e Entry, at time.Time, cause error) error {
	_, err := o.db.ExecContext(ctx, `UPDATE report_outbox SET attempts=attempts+1, last_attempt_ms=?, last_error=? WHERE kind=? AND team=? AND period=?`,
		at.UnixMilli(), cause.Error(), e.Kind, e.Team, e.Period)
	if err != nil {
		return fmt.Errorf("report outbox: mark %s/%s/%s failed: %w", e.Kind, e.Team, e.Period, err)
	}
	return nil
}

// RetryAfter is how long a failed report waits before the next attempt:
// 5 minutes, doubling per failed attempt, at most 6 hours. The sender
// retries within one attempt; this spaces the attempts across ticks.
func RetryAfter(attempts int) time.Duration {
	if attempts <= 0 {
		return 0
	}
	d := 5 * time.Minute
	for i := 1; i < attempts && d < 6*time.Hour; i++ {
		d *= 2
	}
	return min(d, 6*time.Hour)
}

// Flush sends the pending reports of kinds that are due at now. Each
// failure is recorded and the others still go; the joined errors come back.
func (o *Outbox) Flush(ctx context.Context, s mail.Sender, now time.Time, kinds ...string) (sent int, err error) {
	return o.FlushAround(ctx, s, now, nil, kinds...)
}

// Around wraps one delivery: it runs send (or not, returning nil when the
// message went out before) and returns the delivery's outcome. The
// end-of-job mails write the audit log around each send with it.
type Around func(ctx context.Context, e Entry, send func() error) error

// FlushAround is Flush with around (nil: send alone) wrapping each send.
func (o *Outbox) FlushAround(ctx context.Context, s mail.Sender, now time.Time, around Around, kinds ...string) (sent int, err error) {
	if around == nil {
		around = func(_ context.Context, _ Entry, send func() error) error { return send() }
	}
	pending, err := o.Pending(ctx, kinds...)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, e := range pending {
		if e.Attempts > 0 && now.Before(e.LastAttempt.Add(RetryAfter(e.Attempts))) {
			continue // backing off; still pending, reported when it fails again
		}
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if gerr := o.Guard.Check(); gerr != nil {
			// A leader paused past its lease sends nothing more; the
			// report stays pending for whoever leads.
			errs = append(errs, fmt.Errorf("report %s for %s, %s not sent: %w", e.Kind, recipientOf(e), e.Period, gerr))
			break
		}
		if serr := around(ctx, e, func() error { return s.Send(ctx, e.Message) }); serr != nil {
			errs = append(errs, fmt.Errorf("report %s for %s, %s: %w", e.Kind, recipientOf(e), e.Period, serr))
			if merr := o.MarkFailed(ctx, e, now, serr); merr != nil {
				errs = append(errs, merr)
			}
			continue
		}
		if merr := o.MarkSent(ctx, e, now); merr != nil {
			// Delivered but not recorded: the next run would send it
			// again, so this must be loud.
			errs = append(errs, merr)
			continue
		}
		sent++
	}
	return sent, errors.Join(errs...)
}

func recipientOf(e Entry) string {
	if e.Kind == KindJobEnd {
		return "user " + e.Team
	}
	return displayTeam(e.Team)
}

func displayTeam(t string) string {
	if t == "" {
		return "the fleet"
	}
	return "team " + t
}
