package daemon

import (
	"context"
	"time"
)

// LeaseStamps reads when a lease was last stamped by its holder (the
// store's LeaseHolder): a renewal moves the stamp.
type LeaseStamps interface {
	LeaseHolder(ctx context.Context, name string) (holder string, until time.Time, err error)
}

// RunOnceOrStandBy runs one cycle for a one-shot analyzer (the restart
// after a crash, a cron job). A standby takes over only once it has seen
// the lease unrenewed for the lease duration ttl on its own clock, so a
// one-shot run that finds the lease held watches that long, running a
// cycle every tenth of it, and stands by at once when the holder renews
// meanwhile: the holder lives. It returns the last cycle's result.
func (d *Daemon) RunOnceOrStandBy(ctx context.Context, lease LeaseStamps, name string, ttl time.Duration) (CycleResult, error) {
	res, err := d.RunOnce(ctx)
	_, first, _ := lease.LeaseHolder(ctx, name)
	for deadline := time.Now().Add(ttl + ttl/10); err == nil && res.Standby && time.Now().Before(deadline); {
		if _, stamp, _ := lease.LeaseHolder(ctx, name); !stamp.Equal(first) {
			break
		}
		select {
		case <-ctx.Done():
			return res, nil
		case <-time.After(ttl / 10):
		}
		res, err = d.RunOnce(ctx)
	}
	return res, err
}
