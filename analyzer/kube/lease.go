package kube

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
)

// Lease is the leader.Leadership of analyzer replicas in a cluster:
// client-go leader election on a coordination.k8s.io Lease named
// leader.LeaseName.
type Lease struct {
	leading atomic.Bool
	elector *leaderelection.LeaderElector
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
	k := &Lease{}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: leader.LeaseName, Namespace: o.Namespace},
		Client:     o.Coordination,
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.Identity},
	}
	el, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: o.LeaseDuration, RenewDeadline: o.RenewDeadline, RetryPeriod: o.RetryPeriod,
		ReleaseOnCancel: o.ReleaseOnCancel, Name: leader.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { k.leading.Store(true) },
			OnStoppedLeading: func() { k.leading.Store(false) },
		},
	})
	if err != nil {
		return nil, fmt.Errorf("leader election: %w", err)
	}
	k.elector = el
	return k, nil
}

// Run takes part in the election until ctx ends, standing again after a lost
// term.
func (k *Lease) Run(ctx context.Context) {
	for ctx.Err() == nil {
		k.elector.Run(ctx)
	}
}

// Lead implements leader.Leadership: whether this replica leads now.
func (k *Lease) Lead(context.Context, time.Time) (bool, error) {
	return k.leading.Load() && k.elector.IsLeader(), nil
}
