package kube

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
)

// TestLeaseRounds steps two candidates round by round on one clock: the
// first takes the free Lease; the second stands by while the holder
// renews, however far off the holder's written renew time is; once the
// holder stops renewing, the second takes over only after the record has
// stood unchanged for the lease duration on its own clock, and the first,
// back, finds it lost; a Lease given up is taken at the next round.
func TestLeaseRounds(t *testing.T) {
	t.Parallel()
	cs := fake.NewClientset()
	clock := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string) *Lease {
		l, err := NewLease(LeaseOptions{Coordination: cs.CoordinationV1(), Namespace: "gpuwatch", Identity: id,
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		l.now = func() time.Time { return clock }
		return l
	}
	a, b := mk("a"), mk("b")
	ctx := context.Background()
	leads := func(l *Lease) bool { ok, _ := l.Lead(ctx, clock); return ok }
	step := func(d time.Duration, ls ...*Lease) {
		clock = clock.Add(d)
		for _, l := range ls {
			l.round(ctx)
		}
	}
	step(0, a, b)
	if !leads(a) || leads(b) {
		t.Fatalf("first round: a %v, b %v; want a alone", leads(a), leads(b))
	}
	// a renews every 2 s for a minute; b never takes over.
	for i := 0; i < 30; i++ {
		step(2*time.Second, a, b)
		if !leads(a) || leads(b) {
			t.Fatalf("renewing at +%ds: a %v, b %v", 2*(i+1), leads(a), leads(b))
		}
	}
	// The holder's renew time says nothing to b: a record from far in the
	// past that keeps changing still holds.
	got, err := cs.CoordinationV1().Leases("gpuwatch").Get(ctx, leader.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := metav1.NewMicroTime(clock.Add(-24 * time.Hour))
	got.Spec.RenewTime = &old
	if _, err := cs.CoordinationV1().Leases("gpuwatch").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	step(2*time.Second, b)
	if leads(b) {
		t.Fatal("b took a Lease whose record has just changed")
	}
	// a stops (a crash): b waits out 15 s from the last change it saw.
	for waited := 2 * time.Second; waited < 15*time.Second; waited += 2 * time.Second {
		step(2*time.Second, b)
		if leads(b) {
			t.Fatalf("b took over %s after the last change, before the 15 s lease ran out", waited+2*time.Second)
		}
	}
	step(2*time.Second, b)
	if !leads(b) {
		t.Fatal("b did not take over a lapsed Lease")
	}
	// a, stalled since its last renewal, has stopped claiming the lead by
	// its renew deadline, before b could take over.
	if leads(a) {
		t.Fatal("a still leads 18 s after its last renewal (renew deadline 10 s)")
	}
	// a comes back and finds the Lease lost.
	step(0, a)
	if leads(a) || !leads(b) {
		t.Fatalf("after the takeover: a %v, b %v; want b alone", leads(a), leads(b))
	}
	// b gives the Lease up; a takes it at its next round.
	b.release()
	step(2*time.Second, a)
	if !leads(a) {
		t.Fatal("a did not take a given-up Lease at once")
	}
}
