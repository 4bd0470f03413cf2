package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// UsageTotals sums usage per allocation (host, job and team) for the
// periods [bounds[i], bounds[i+1]), in the database instead of
// materialising weeks of intervals. Each sum is a Usage starting at its
// period's start; out[i] holds period i's.
func (s *Store) UsageTotals(ctx context.Context, bounds []time.Time) ([][]Usage, error) {
	if len(bounds) < 2 {
		return nil, nil
	}
	var cases strings.Builder
	args := []any{}
	for i := 1; i < len(bounds)-1; i++ {
		fmt.Fprintf(&cases, " WHEN start_ms < ? THEN %d", i-1)
		args = append(args, bounds[i].UnixMilli())
	}
	b := fmt.Sprintf("CASE%s ELSE %d END", cases.String(), len(bounds)-2)
	if len(bounds) == 2 {
		b = "0"
	}
	q := `SELECT team, hostname, job, MAX(user), ` + b + ` AS b, SUM(allocated_gpu_hours), SUM(active_gpu_hours)
		FROM usage WHERE start_ms >= ? AND start_ms < ? GROUP BY team, hostname, job, b ORDER BY b, hostname, job, team`
	args = append(args, bounds[0].UnixMilli(), bounds[len(bounds)-1].UnixMilli())
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sum usage: %w", err)
	}
	defer rows.Close()
	out := make([][]Usage, len(bounds)-1)
	for rows.Next() {
		var u Usage
		var b int
		if err := rows.Scan(&u.Team, &u.Hostname, &u.Job, &u.User, &b, &u.AllocatedGPUHours, &u.ActiveGPUHours); err != nil {
			return nil, fmt.Errorf("sum usage: %w", err)
		}
		if b >= 0 && b < len(out) {
			u.Start, u.End = bounds[b], bounds[b+1]
			out[b] = append(out[b], u)
		}
	}
	return out, rows.Err()
}

// Action is one settled step of the audit log (done, failed, skipped,
// dry-run; not the intent written before it), as reports list it.
type Action struct {
	Time    time.Time
	Step    string
	Pattern string
	Team    string
	User    string
	Job     string
	State   string
	DryRun  bool
}

// MaxActions bounds what ActionsBetween returns: a report lists actions, it
// does not page through a runaway log.
const MaxActions = 10000

// ActionsBetween returns the settled steps of the audit log in [from, to),
// oldest first.
func (s *Store) ActionsBetween(ctx context.Context, from, to time.Time) ([]Action, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT at_ms, step, pattern, team, user, job, state, dry_run
		FROM audit_events WHERE state != 'intended' AND at_ms >= ? AND at_ms < ? ORDER BY at_ms, id LIMIT ?`,
		from.UnixMilli(), to.UnixMilli(), MaxActions)
	if err != nil {
		return nil, fmt.Errorf("read action log: %w", err)
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		var a Action
		var ms int64
		var dry int
		if err := rows.Scan(&ms, &a.Step, &a.Pattern, &a.Team, &a.User, &a.Job, &a.State, &dry); err != nil {
			return nil, fmt.Errorf("read action log: %w", err)
		}
		a.Time, a.DryRun = time.UnixMilli(ms).UTC(), dry != 0
		out = append(out, a)
	}
	return out, rows.Err()
}
