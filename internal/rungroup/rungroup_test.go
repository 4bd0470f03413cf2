package rungroup

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// The first member to return ends the others, its error is Run's, and Run
// returns only after every member has: a member's cleanup after its
// context ends (a lease release) is done by then.
func TestFirstReturnEndsAllAndRunJoins(t *testing.T) {
	g := New(context.Background())
	boom := errors.New("listener failed")
	var cleaned atomic.Int32
	for range 3 {
		g.Loop(func(ctx context.Context) {
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // cleanup that takes a while
			cleaned.Add(1)
		})
	}
	g.Go(func(context.Context) error { return boom })
	if err := g.Run(); !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the failing member's error", err)
	}
	if n := cleaned.Load(); n != 3 {
		t.Fatalf("Run returned with %d of 3 members done cleaning up", n)
	}
}

// The group's context ending ends every member; a member that returns nil
// then makes Run return nil.
func TestParentContextEndsGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := New(ctx)
	var ended atomic.Int32
	for range 2 {
		g.Go(func(ctx context.Context) error {
			<-ctx.Done()
			ended.Add(1)
			return nil
		})
	}
	done := make(chan error, 1)
	go func() { done <- g.Run() }()
	cancel()
	select {
	case err := <-done:
		if err != nil || ended.Load() != 2 {
			t.Fatalf("Run = %v with %d of 2 members ended", err, ended.Load())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func TestEmptyGroup(t *testing.T) {
	if err := New(context.Background()).Run(); err != nil {
		t.Fatal(err)
	}
}
