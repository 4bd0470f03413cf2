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
// schema version 3, its generation column version 4 (schema.go).
//
// The store never judges a lease expired by its own wall clock: hosts'
// clocks differ, and one that runs ahead would take a live lease. Each
// renewal changes the row's stamp (expires_ms, which only ever grows), and
// a standby takes the lease over only once it has seen the same stamp for
// the lease duration on its own monotonic clock (leader.StoreLease), with
// TakeLease comparing the stamp it saw.
//
// A lease also has a generation, bumped whenever its holder changes (a
// take, a claim of a free or released lease). A holder acts under the
// generation it won (a Fence), and the store refuses a write made under
// any other (HoldFence): a process that was paused past its lease and
// wakes up believing it still leads cannot write an intent or a result.

// ErrFenced is the store's refusal of a write made under a lease holder
// and generation that are no longer the lease's: another analyzer took
// over (or the lease was released or tampered with) since the writer won it.
var ErrFenced = errors.New("fenced: the lease is no longer this analyzer's")

// Lease is a lease row.
type Lease struct {
	// Holder is "" when nobody holds the lease (never taken, or released).
	Holder string
	// Stamp is the renewal stamp (expires_ms), which only ever grows.
	Stamp time.Time
	// Generation is bumped whenever the holder changes.
	Generation int64
}

// Fence names the lease holder and generation a write is made under.
type Fence struct {
	Lease, Holder string
	Generation    int64
}

// HoldFence checks, inside tx, that the lease is still f's, and returns
// ErrFenced when it is not. The check is an update of the lease row, so
// on PostgreSQL the row stays locked until tx ends (a take waits for the
// write, or the write sees the take) and on SQLite tx holds the write lock:
// the lease cannot pass on between the check and the commit.
func HoldFence(ctx context.Context, tx *sql.Tx, f Fence) error {
	if f.Lease == "" || f.Holder == "" {
		return fmt.Errorf("%w: no lease won", ErrFenced)
	}
	res, err := tx.ExecContext(ctx, `UPDATE leases SET generation = generation WHERE name = ? AND holder = ? AND generation = ?`,
		f.Lease, f.Holder, f.Generation)
	if err != nil {
		return fmt.Errorf("check lease %s: %w", f.Lease, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("check lease %s: %w", f.Lease, err)
	} else if n != 1 {
		return fmt.Errorf("%w: lease %s has passed on from generation %d", ErrFenced, f.Lease, f.Generation)
	}
	return nil
}

// AcquireLease takes the lease name for holder when nobody holds it (a new
// generation), or renews it when holder has it already (the same
// generation); it fails (false) while another holder has it, whatever its
// stamp says. A new lease row starts above every generation the audit
// holds, so a row deleted by hand does not hand an old generation out again.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration, now time.Time) (Lease, bool, error) {
	if holder == "" || ttl <= 0 {
		return Lease{}, false, errors.New("acquire lease: need a holder and a positive duration")
	}
	l, err := scanLease(s.db.QueryRowContext(ctx, `INSERT INTO leases (name, holder, expires_ms, generation)
		VALUES (?, ?, ?, (SELECT COALESCE(MAX(generation), 0) + 1 FROM actions))
		ON CONFLICT (name) DO UPDATE SET
			expires_ms = CASE WHEN excluded.expires_ms > leases.expires_ms THEN excluded.expires_ms ELSE leases.expires_ms + 1 END,
			generation = CASE WHEN leases.holder = excluded.holder THEN leases.generation ELSE leases.generation + 1 END,
			holder = excluded.holder
		WHERE leases.holder = excluded.holder OR leases.holder = ''
		RETURNING holder, expires_ms, generation`,
		name, holder, now.Add(ttl).UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return l, l.Holder == holder, nil
}

// TakeLease takes the lease from a holder that stopped renewing, only if
// the row is still the one the taker saw (holder from, stamp seen): a
// renewal in between keeps the lease where it is. A take starts a new
// generation.
func (s *Store) TakeLease(ctx context.Context, name, from string, seen time.Time, holder string, ttl time.Duration, now time.Time) (Lease, bool, error) {
	if holder == "" || ttl <= 0 {
		return Lease{}, false, errors.New("take lease: need a holder and a positive duration")
	}
	exp := now.Add(ttl).UnixMilli()
	l, err := scanLease(s.db.QueryRowContext(ctx, `UPDATE leases SET holder = ?,
			expires_ms = CASE WHEN ? > expires_ms THEN ? ELSE expires_ms + 1 END, generation = generation + 1
		WHERE name = ? AND holder = ? AND expires_ms = ?
		RETURNING holder, expires_ms, generation`,
		holder, exp, exp, name, from, seen.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("take lease %s: %w", name, err)
	}
	return l, true, nil
}

// ReleaseLease gives the lease up if holder has it, so that another process
// may take it at once. The row stays, holder-less, so that its generation
// keeps growing across holders.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if holder == "" {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE leases SET holder = '' WHERE name = ? AND holder = ?`, name, holder); err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// ReadLease returns the lease row (the zero Lease when there is none).
func (s *Store) ReadLease(ctx context.Context, name string) (Lease, error) {
	l, err := scanLease(s.db.QueryRowContext(ctx, `SELECT holder, expires_ms, generation FROM leases WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return Lease{}, nil
	}
	if err != nil {
		return Lease{}, fmt.Errorf("read lease %s: %w", name, err)
	}
	return l, nil
}

// LeaseHolder returns who holds the lease and until when ("" when nobody
// ever did or it was released).
func (s *Store) LeaseHolder(ctx context.Context, name string) (string, time.Time, error) {
	l, err := s.ReadLease(ctx, name)
	return l.Holder, l.Stamp, err
}

func scanLease(row *sql.Row) (Lease, error) {
	var l Lease
	var ms int64
	if err := row.Scan(&l.Holder, &ms, &l.Generation); err != nil {
		return Lease{}, err
	}
	l.Stamp = time.UnixMilli(ms).UTC()
	return l, nil
}
