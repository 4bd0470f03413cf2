package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// UsageSpan is when the stored usage of team (every team when team is
// empty) begins and ends: the start of its first interval and the end of its
// last. ok is false when there is none. It lets an empty report say from
// when data exists instead of showing zeros.
func (s *Store) UsageSpan(ctx context.Context, team string) (first, last time.Time, ok bool, err error) {
	q := `SELECT MIN(start_ms), MAX(end_ms) FROM usage`
	var args []any
	if team != "" {
		q += ` WHERE team = ?`
		args = append(args, team)
	}
	var lo, hi sql.NullInt64
	if err := s.db.QueryRowContext(ctx, q, args...).Scan(&lo, &hi); err != nil {
		return first, last, false, fmt.Errorf("read usage span: %w", err)
	}
	if !lo.Valid || !hi.Valid {
		return first, last, false, nil
	}
	return time.UnixMilli(lo.Int64).UTC(), time.UnixMilli(hi.Int64).UTC(), true, nil
}
