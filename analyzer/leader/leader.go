// Package leader elects the one analyzer that acts when several run: a
// lease row in the shared store, and, for Deployment replicas, an election
// on a coordination.k8s.io Lease by client-go's rules (kube.Lease, in the
// Kubernetes adapter analyzer/kube), both behind Leadership. The others
// stand by.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// Leadership says whether this analyzer may act now. Only the leader runs
// cycles (and reconciles, escalates and sends reports); the others stand by,
// so two analyzers on one store, or two replicas of a Deployment, never both
// warn or reclaim.
type Leadership interface {
	// Lead claims or renews leadership at now and reports whether it is held.
	Lead(ctx context.Context, now time.Time) (bool, error)
}

// LeaseName is the name of the analyzer's lease, in the store and as the
// Kubernetes Lease object.
const LeaseName = "gpuwatch-analyzer"

// Identity names this process among the candidates. Its random part is
// what identifies it: two analyzers in containers that share a host name
// and a pid are still two candidates, and a restarted process is a new
// one. Host and pid are there for people reading the lease.
func Identity() string {
	host, _ := os.Hostname()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// StoreLease is leadership through a lease row in the shared store.
type StoreLease struct {
	Store    *store.Store
	Identity string
	// TTL is how long a claim lasts without renewal: a dead leader's
	// successor takes over TTL after it last saw the lease renewed.
	TTL time.Duration

	mu   sync.Mutex
	seen observed
}

// observed is the lease row a standby last saw change, and when (on the
// standby's own clock).
type observed struct {
	holder string
	stamp  time.Time
	at     time.Time
}

// Lead implements Leadership. A standby takes the lease only after it has
// seen the holder's row unchanged for TTL, timed on its own clock (now
// carries Go's monotonic reading in production): the holder's wall clock,
// ahead or behind, never decides, and a renewal in between keeps the lease
// where it is.
func (l *StoreLease) Lead(ctx context.Context, now time.Time) (bool, error) {
	ok, err := l.Store.AcquireLease(ctx, LeaseName, l.Identity, l.TTL, now)
	if err != nil || ok {
		return ok, err
	}
	holder, stamp, err := l.Store.LeaseHolder(ctx, LeaseName)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if holder != l.seen.holder || !stamp.Equal(l.seen.stamp) || l.seen.at.IsZero() {
		l.seen = observed{holder: holder, stamp: stamp, at: now}
		return false, nil
	}
	if now.Sub(l.seen.at) < l.TTL {
		return false, nil
	}
	return l.Store.TakeLease(ctx, LeaseName, holder, stamp, l.Identity, l.TTL, now)
}

// Release gives the lease up (on shutdown, so a successor need not wait).
func (l *StoreLease) Release(ctx context.Context) error {
	return l.Store.ReleaseLease(ctx, LeaseName, l.Identity)
}

// Both leads only when every one of its members does (the store lease and
// the Kubernetes Lease).
type Both []Leadership

// Lead implements Leadership.
func (b Both) Lead(ctx context.Context, now time.Time) (bool, error) {
	for _, l := range b {
		ok, err := l.Lead(ctx, now)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
