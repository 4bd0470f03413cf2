// Package leader elects the one analyzer that acts when several run: a
// lease row in the shared store, and, for Deployment replicas, an election
// on a coordination.k8s.io Lease by client-go's rules (kube.Lease, in the
// Kubernetes adapter analyzer/kube), both behind Leadership. The others
// stand by.
//
// Leading at the start of a cycle is not enough to act at its end: a
// process paused past its lease (SIGSTOP, a frozen VM) wakes up believing
// it leads. So leadership is also a Fence (fence.go): the lease generation
// the store compares every audit write with, and the renew deadline on the
// process's own monotonic clock that a Guard checks right before each act.
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
	// Fencer gives the proof of the leadership last claimed, which each
	// act checks again.
	Fencer
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
	// RenewDeadline is how long after its last claim or renewal this
	// process still acts (default two thirds of TTL): less than TTL, so
	// that it stops before a successor can have counted TTL out on its own
	// clock from the renewal it saw.
	RenewDeadline time.Duration

	mu    sync.Mutex
	seen  observed
	fence Fence
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
// where it is. A claim or renewal refreshes the fence; a lost lease clears
// it; a failed read keeps it, to lapse at its own deadline.
func (l *StoreLease) Lead(ctx context.Context, now time.Time) (bool, error) {
	got, ok, err := l.Store.AcquireLease(ctx, LeaseName, l.Identity, l.TTL, now)
	if err != nil {
		return false, err
	}
	if ok {
		l.won(got, now)
		return true, nil
	}
	cur, err := l.Store.ReadLease(ctx, LeaseName)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	l.fence = Fence{}
	due := l.watch(cur, now)
	l.mu.Unlock()
	if !due {
		return false, nil
	}
	got, ok, err = l.Store.TakeLease(ctx, LeaseName, cur.Holder, cur.Stamp, l.Identity, l.TTL, now)
	if err != nil || !ok {
		return false, err
	}
	l.won(got, now)
	return true, nil
}

// watch notes the row a standby sees and reports whether it has stayed
// unchanged for TTL on this process's clock. A reading before the one the
// row was first seen at counts nothing (the watch is not restarted from
// it, which would make the time since look longer once the clock is back).
func (l *StoreLease) watch(cur store.Lease, now time.Time) bool {
	if cur.Holder != l.seen.holder || !cur.Stamp.Equal(l.seen.stamp) || l.seen.at.IsZero() {
		l.seen = observed{holder: cur.Holder, stamp: cur.Stamp, at: now}
		return false
	}
	return now.Sub(l.seen.at) >= l.TTL
}

// won records the lease as this process's at now (read before the claim
// was written, so the deadline errs early).
func (l *StoreLease) won(got store.Lease, now time.Time) {
	rd := l.RenewDeadline
	if rd <= 0 || rd >= l.TTL {
		rd = l.TTL * 2 / 3
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence = Fence{Store: store.Fence{Lease: LeaseName, Holder: l.Identity, Generation: got.Generation},
		Won: now, Deadline: now.Add(rd)}
}

// Fence implements Fencer.
func (l *StoreLease) Fence() Fence {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fence
}

// Release gives the lease up (on shutdown, so a successor need not wait).
func (l *StoreLease) Release(ctx context.Context) error {
	l.mu.Lock()
	l.fence = Fence{}
	l.mu.Unlock()
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

// Fence implements Fencer: the store generation of the member that has
// one, and the earliest deadline of all.
func (b Both) Fence() Fence {
	fs := make([]Fence, len(b))
	for i, l := range b {
		fs[i] = l.Fence()
	}
	return Meet(fs...)
}
