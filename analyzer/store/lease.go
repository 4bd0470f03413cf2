package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Leases let several processes share one store while only one of them acts:
// a named lease has at most one holder until it expires. Taking and
// renewing is one SQL statement, so two processes can never both win. The
// leases table is schema version 3 (schema.go).

// AcquireLease takes the lease name for holder until now+ttl, or renews it
// when holder has it already. It fails (false) while another holder's lease
// has not expired.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (bool, error) {
	if holder == "" || ttl <= 0 {
		return false, errors.New("acquire lease: need a holder and a positive duration")
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO leases (name, holder, expires_ms) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
		WHERE leases.holder = excluded.holder OR leases.expires_ms <= ?`,
		name, holder, now.Add(ttl).UnixMilli(), now.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	got, _, err := s.LeaseHolder(ctx, name)
	if err != nil {
		return false, err
	}
	return got == holder, nil
}

// TakeLease takes the lease from a holder known to be dead (a crashed
// process on this host), only if that holder still has it.
func (s *Store) TakeLease(ctx context.Context, name, from, holder string, ttl time.Duration, now time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE leases SET holder = ?, expires_ms = ? WHERE name = ? AND holder = ?`,
		holder, now.Add(ttl).UnixMilli(), name, from)
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
