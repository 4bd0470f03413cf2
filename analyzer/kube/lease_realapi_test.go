package kube_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/internal/testkube"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// TestLeaseOnRealAPIServer: two analyzers elect on a real
// coordination.k8s.io Lease. Exactly one leads, and the Lease names it; when
// it stops without giving the Lease up (a crash), the other takes over
// within the lease duration and a retry period; when it stops and releases
// the Lease (SIGTERM), the other takes over at its next retry.
func TestLeaseOnRealAPIServer(t *testing.T) {
	const (
		lease = 3 * time.Second
		renew = 2 * time.Second
		retry = 250 * time.Millisecond
	)
	for _, release := range []bool{false, true} {
		name := "crash"
		if release {
			name = "release"
		}
		t.Run(name, func(t *testing.T) {
			cs := testkube.Admin(t)
			ns := testkube.Namespace(t, cs, nil)
			type elector struct {
				id     string
				kl     *kube.Lease
				cancel context.CancelFunc
				done   chan struct{}
			}
			start := func(id string) *elector {
				kl, err := kube.NewLease(kube.LeaseOptions{Coordination: cs.CoordinationV1(), Namespace: ns, Identity: id,
					LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry, ReleaseOnCancel: release})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				e := &elector{id: id, kl: kl, cancel: cancel, done: make(chan struct{})}
				go func() { defer close(e.done); kl.Run(ctx) }()
				t.Cleanup(func() { cancel(); <-e.done })
				return e
			}
			es := []*elector{start("analyzer-a"), start("analyzer-b")}
			leaders := func() []*elector {
				var l []*elector
				for _, e := range es {
					if ok, err := e.kl.Lead(context.Background(), time.Now()); err != nil {
						t.Fatal(err)
					} else if ok {
						l = append(l, e)
					}
				}
				return l
			}
			var first *elector
			testtool.Eventually(t, 30*time.Second, "a leader", func() (bool, error) {
				l := leaders()
				if len(l) > 1 {
					t.Fatalf("%d leaders at once", len(l))
				}
				if len(l) == 1 {
					first = l[0]
				}
				return first != nil, nil
			})
			// Over several renewals the same one, and only it, leads: for
			// longer than a lease, which the other would take over had the
			// renewals stopped.
			for end := time.Now().Add(lease + time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if l := leaders(); len(l) != 1 || l[0] != first {
					t.Fatalf("leaders %v, want only %s", l, first.id)
				}
			}
			l, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), leader.LeaseName, metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != first.id {
				t.Fatalf("the Lease: %v %v; want it held by %s", l, err, first.id)
			}

			first.cancel()
			stopped := time.Now()
			<-first.done
			var second *elector
			testtool.Eventually(t, 30*time.Second, "a new leader", func() (bool, error) {
				l := leaders()
				if len(l) > 1 {
					t.Fatalf("%d leaders at once", len(l))
				}
				if len(l) == 1 {
					second = l[0]
				}
				return second != nil, nil
			})
			took := time.Since(stopped)
			t.Logf("%s took over %.2fs after %s stopped (lease %s, retry %s, released %v)", second.id, took.Seconds(), first.id, lease, retry, release)
			if second == first {
				t.Fatalf("%s leads again after it stopped", first.id)
			}
			// The bound: the lease (or, released, a retry) plus a retry,
			// with a second for a loaded CI machine.
			limit := lease + retry + time.Second
			if release {
				limit = 2*retry + time.Second
			}
			if took > limit {
				t.Fatalf("took over after %s, want within %s", took, limit)
			}
		})
	}
}
