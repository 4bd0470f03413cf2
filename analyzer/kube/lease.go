package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
)

// Lease is the leader.Leadership of analyzer replicas in a cluster: an
// election on a coordination.k8s.io Lease named leader.LeaseName, by the
// record and the rules of client-go's leader election, so replicas of
// either kind share one Lease through a rolling upgrade. The holder renews
// the record every retry period and stops leading when it has not renewed
// for the renew deadline; a candidate takes the Lease over when the record
// has not changed for the lease duration on its own clock (the holder's
// wall clock, written in the record for people, never decides), or at once
// when the holder gave it up. Every write is a compare-and-set on the
// record's resourceVersion, so two candidates never both win a round.
//
// Written on the typed Lease client rather than on
// k8s.io/client-go/tools/leaderelection: that package's coordinated
// election (leasecandidate.go) links client-go's informers, listers and
// full clientset, about 240 packages, into an analyzer that calls three
// verbs on one resource.
type Lease struct {
	o   LeaseOptions
	now func() time.Time

	mu      sync.Mutex
	leading bool
	renewed time.Time     // the last successful acquire or renew, on our clock
	seen    observedLease // the record as last seen changing
}

// observedLease is a Lease record and when (on our clock) it was first
// seen that way.
type observedLease struct {
	holder, version  string
	renew, acquire   time.Time
	transitions      int32
	at               time.Time
	durationFromSpec time.Duration
}

// LeaseOptions configure Lease; zero durations take client-go's usual
// values (15s, 10s, 2s).
type LeaseOptions struct {
	// Coordination gets, creates and updates the Lease; nothing else of
	// the API is used.
	Coordination                              coordinationv1client.CoordinationV1Interface
	Namespace, Identity                       string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ReleaseOnCancel gives the Lease up when the process stops, so that
	// another replica takes over at once.
	ReleaseOnCancel bool
}

// NewLease prepares the election; Run takes part in it.
func NewLease(o LeaseOptions) (*Lease, error) {
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	switch {
	case o.Coordination == nil:
		return nil, errors.New("leader election: no Lease client")
	case o.Identity == "":
		return nil, errors.New("leader election: no identity")
	case o.RetryPeriod <= 0 || o.RenewDeadline <= o.RetryPeriod || o.LeaseDuration <= o.RenewDeadline:
		return nil, fmt.Errorf("leader election: want lease duration %s > renew deadline %s > retry period %s > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	return &Lease{o: o, now: time.Now}, nil
}

// Run takes part in the election until ctx ends, one round every retry
// period, and then gives the Lease up when ReleaseOnCancel says so.
func (k *Lease) Run(ctx context.Context) {
	t := time.NewTicker(k.o.RetryPeriod)
	defer t.Stop()
	for {
		k.round(ctx)
		select {
		case <-ctx.Done():
			if k.o.ReleaseOnCancel {
				k.release()
			}
			k.mu.Lock()
			k.leading = false
			k.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// Lead implements leader.Leadership: whether this replica leads now.
func (k *Lease) Lead(context.Context, time.Time) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.leading && k.now().Sub(k.renewed) < k.o.RenewDeadline, nil
}

// Fence implements leader.Fencer: the span from the last successful
// acquire or renew to the renew deadline, on this process's clock. The
// Kubernetes Lease has no generation the analyzer's store could compare;
// the store lease beside it (leader.Both) has.
func (k *Lease) Fence() leader.Fence {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.leading {
		return leader.Fence{}
	}
	return leader.Fence{Won: k.renewed, Deadline: k.renewed.Add(k.o.RenewDeadline)}
}

// round acquires or renews the Lease once, each call bounded by the retry
// period, and keeps the leading flag: a failed renewal keeps it until the
// renew deadline, well inside the lease duration others wait out.
func (k *Lease) round(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, k.o.RetryPeriod)
	defer cancel()
	won, lost := k.tryAcquireOrRenew(rctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	switch now := k.now(); {
	case won:
		k.leading, k.renewed = true, now
	case lost || now.Sub(k.renewed) >= k.o.RenewDeadline:
		k.leading = false
	}
}

// tryAcquireOrRenew writes this replica into the Lease when it holds it,
// when it is free or given up, or when its holder has let it lapse; lost
// says another replica holds it.
func (k *Lease) tryAcquireOrRenew(ctx context.Context) (won, lost bool) {
	leases := k.o.Coordination.Leases(k.o.Namespace)
	now := k.now()
	stamp := metav1.NewMicroTime(now)
	secs := int32(k.o.LeaseDuration.Round(time.Second) / time.Second)
	l, err := leases.Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: leader.LeaseName, Namespace: k.o.Namespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &k.o.Identity, LeaseDurationSeconds: &secs, AcquireTime: &stamp, RenewTime: &stamp}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err == nil, false
	}
	if err != nil {
		return false, false
	}
	seen := k.observe(l, now)
	switch {
	case seen.holder == k.o.Identity:
	case seen.holder != "" && now.Sub(seen.at) < seen.durationFromSpec:
		return false, true
	default:
		// Free, given up, or lapsed: a new term.
		l.Spec.AcquireTime = &stamp
		l.Spec.LeaseTransitions = ptrTo(seen.transitions + 1)
	}
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &k.o.Identity, &stamp, &secs
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return false, apierrors.IsConflict(err)
	}
	return true, false
}

// observe records l when it differs from the record last seen, and returns
// what is known of it.
func (k *Lease) observe(l *coordinationv1.Lease, now time.Time) observedLease {
	s := observedLease{version: l.ResourceVersion, durationFromSpec: k.o.LeaseDuration}
	if h := l.Spec.HolderIdentity; h != nil {
		s.holder = *h
	}
	if t := l.Spec.RenewTime; t != nil {
		s.renew = t.Time
	}
	if t := l.Spec.AcquireTime; t != nil {
		s.acquire = t.Time
	}
	if n := l.Spec.LeaseTransitions; n != nil {
		s.transitions = *n
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		s.durationFromSpec = time.Duration(*d) * time.Second
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	prev := k.seen
	prev.at, s.at = time.Time{}, time.Time{}
	if prev != s || k.seen.at.IsZero() {
		s.at = now
		k.seen = s
	}
	return k.seen
}

// release gives the Lease up when this replica holds it: the record names
// no holder and lasts a second, so a candidate takes it at its next round.
func (k *Lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), k.o.RetryPeriod)
	defer cancel()
	k.mu.Lock()
	leading := k.leading
	k.mu.Unlock()
	if !leading {
		return
	}
	leases := k.o.Coordination.Leases(k.o.Namespace)
	l, err := leases.Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != k.o.Identity {
		return
	}
	stamp := metav1.NewMicroTime(k.now())
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds, l.Spec.RenewTime, l.Spec.AcquireTime = ptrTo(""), ptrTo(int32(1)), &stamp, &stamp
	_, _ = leases.Update(ctx, l, metav1.UpdateOptions{})
}

func ptrTo[T any](v T) *T { return &v }
