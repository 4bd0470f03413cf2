package leader

import (
	"errors"
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

// Fence is the proof of leadership an act is made under: the store lease's
// holder and generation, which the store compares each audit write with
// (store.HoldFence), and the span of this process's clock during which it
// may act: from the claim or renewal it won (Won) to its renew deadline.
// Both times are readings of the process's own clock; in production they
// carry Go's monotonic reading, so a wall clock stepped by NTP or by hand
// moves neither. The zero Fence is not valid: a process that never led,
// or lost the lease, acts on nothing.
type Fence struct {
	// Store is the store lease the audit writes are checked against; its
	// zero value (a Kubernetes Lease alone) checks nothing in the store.
	Store store.Fence
	// Won is when the lease was last claimed or renewed, Deadline when
	// acting stops unless it is renewed again.
	Won, Deadline time.Time
	// Sole: no other analyzer can act (no shared lease is configured): the
	// fence is always valid and nothing is compared.
	Sole bool
}

// SoleFence is the fence of an analyzer that shares its store with no
// other: always valid.
func SoleFence() Fence { return Fence{Sole: true} }

// Valid reports whether an act may start at now. A reading before Won
// (a clock that went backwards, which a monotonic one never does) is
// refused, not trusted to extend the lease.
func (f Fence) Valid(now time.Time) bool {
	if f.Sole {
		return true
	}
	return !f.Deadline.IsZero() && !now.Before(f.Won) && now.Before(f.Deadline)
}

// Meet is the fence that holds only where each of fs does: the store lease
// of the one that names it, the latest Won, the earliest deadline. It is
// Sole when every member is (or there is none).
func Meet(fs ...Fence) Fence {
	out := SoleFence()
	for _, f := range fs {
		switch {
		case f.Sole:
			continue
		case out.Sole:
			out = f
			continue
		}
		if f.Store.Lease != "" {
			out.Store = f.Store
		}
		if f.Won.After(out.Won) {
			out.Won = f.Won
		}
		if f.Deadline.Before(out.Deadline) {
			out.Deadline = f.Deadline
		}
	}
	return out
}

// Fencer gives the fence this process acts under now.
type Fencer interface {
	Fence() Fence
}

// ErrNotLeader is a Guard's refusal: this process no longer leads (its
// renew deadline passed, or the lease went to another).
var ErrNotLeader = errors.New("not the leader")

// Guard is the check made right before each act (a cancel, a message, a
// drain, a mail): the fence of the leadership must still be valid on the
// process's clock at that moment, not only at the start of the cycle.
// A nil Guard, or one without a Fencer, guards a sole analyzer and allows
// everything.
type Guard struct {
	Fencer Fencer
	// Now reads the process's clock (default time.Now, monotonic).
	Now func() time.Time
}

// Check returns nil when an act may start now, else an error wrapping
// ErrNotLeader.
func (g *Guard) Check() error {
	if g == nil || g.Fencer == nil {
		return nil
	}
	now := time.Now()
	if g.Now != nil {
		now = g.Now()
	}
	f := g.Fencer.Fence()
	if f.Valid(now) {
		return nil
	}
	if f.Deadline.IsZero() {
		return fmt.Errorf("%w: the lease is not held", ErrNotLeader)
	}
	return fmt.Errorf("%w: the lease won at %s lapsed at %s (now %s)", ErrNotLeader,
		f.Won.Format(time.RFC3339Nano), f.Deadline.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano))
}

// Fenced reports whether err is a refusal for lack of leadership: a
// Guard's, or the store's.
func Fenced(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, store.ErrFenced)
}
