package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Leases let several processes share one store while only one of them acts:
// a named lease has at most one holder. Taking and renewing is one SQL
// statement, so two processes can never both win. The leases table is
// schema version 3 (schema.go).
//
// The store never judges a lease expired by its own wall clock: hosts'
// clocks differ, and one that runs ahead would take a live lease. Each
// renewal changes the row's stamp (expires_ms, which only ever grows), and
// a standby takes the lease over only once it has seen the same stamp for
// the lease duration on its own monotonic clock (leader.StoreLease), with
// TakeLease comparing the stamp it saw.

// AcquireLease takes the lease name for holder when nobody holds it, or
// renews it when holder has it already; it fails (false) while another
// holder has it, whatever its stamp says.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error) {
	if holder == "" || ttl <= 0 {
		return false, errors.New("acquire lease: need a holder and a positive duration")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET expires_ms = CASE WHEN excluded.expires_ms > leases.expires_ms
			THEN excluded.expires_ms ELSE leases.expires_ms + 1 END
		WHERE leases.holder = excluded.holder`,
		name, holder, now.Add(ttl).UnixMilli())
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	got, _, err := s.LeaseHolder(ctx, name)
	if err != nil {
		return false, err
	}
	return got == holder, nil
}

// TakeLease takes the lease from a holder that stopped renewing, only if
// the row is still the one the taker saw (holder from, stamp seen): a
// renewal in between keeps the lease where it is.
func (s *Store) TakeLease(ctx context.Context, name, from string, seen time.Time, holder string, ttl time.Duration, now time.Time) (bool, error) {
	exp := now.Add(ttl).UnixMilli()
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET holder = ?, expires_ms = CASE WHEN ? > expires_ms THEN ? ELSE expires_ms + 1 END
		WHERE name = ? AND holder = ? AND expires_ms = ?`,
		holder, exp, exp, name, from, seen.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("take lease %s: %w", name, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseLease gives the lease up if holder has it, so that another process
// may take it at once.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM leases WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// LeaseHolder returns who holds the lease and until when ("" when nobody
// ever did or it was released).
func (s *Store) LeaseHolder(ctx context.Context, name string) (string, time.Time, error) {
	var holder string
	var ms int64
	err := s.db.QueryRowContext(ctx, `SELECT holder, expires_ms FROM leases WHERE name = ?`, name).Scan(&holder, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("read lease %s: %w", name, err)
	}
	return holder, time.UnixMilli(ms).UTC(), nil
}
