package report

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
)

type countingSender struct {
	mu   sync.Mutex
	sent []string
}

func (c *countingSender) Send(_ context.Context, m mail.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, m.Subject)
	return nil
}

type fenceAt leader.Fence

func (f fenceAt) Fence() leader.Fence { return leader.Fence(f) }

// The outbox checks leadership right before each send: a report goes out
// from a sole analyzer or a leader inside its renew deadline, and stays
// pending (for whoever leads) when this process's lease lapsed while it
// was paused, was never won, or its clock reads before the claim.
func TestOutboxSendsOnlyWhileLeading(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	held := fenceAt{Won: t0, Deadline: t0.Add(10 * time.Second)}
	for _, tc := range []struct {
		name  string
		guard *leader.Guard
		sent  bool
	}{
		{"a sole analyzer", nil, true},
		{"the leader inside its deadline", &leader.Guard{Fencer: held, Now: func() time.Time { return t0.Add(time.Second) }}, true},
		{"paused past its deadline", &leader.Guard{Fencer: held, Now: func() time.Time { return t0.Add(46 * time.Second) }}, false},
		{"never led", &leader.Guard{Fencer: fenceAt{}, Now: func() time.Time { return t0 }}, false},
		{"clock before the claim", &leader.Guard{Fencer: held, Now: func() time.Time { return t0.Add(-time.Hour) }}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := store.Open(filepath.Join(t.TempDir(), "s.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ob, _ := OpenOutbox(ctx, st)
			ob.Guard = tc.guard
			for _, team := range []string{"ml", "vision"} {
				if _, err := ob.Enqueue(ctx, Entry{Kind: KindTeamWeekly, Team: team, Period: "2026-W09", Created: t0,
					Subject: "report " + team, Message: mail.Message{To: []string{team + "@example.org"}, Subject: "report " + team}}); err != nil {
					t.Fatal(err)
				}
			}
			s := &countingSender{}
			n, err := ob.Flush(ctx, s, t0, KindTeamWeekly)
			pending, _ := ob.Pending(ctx, KindTeamWeekly)
			if tc.sent {
				if err != nil || n != 2 || len(s.sent) != 2 || len(pending) != 0 {
					t.Fatalf("sent %d (%v), pending %d: %v", n, s.sent, len(pending), err)
				}
				return
			}
			if !errors.Is(err, leader.ErrNotLeader) || n != 0 || len(s.sent) != 0 || len(pending) != 2 {
				t.Fatalf("sent %d (%v), pending %d: %v; want nothing sent, both pending, ErrNotLeader", n, s.sent, len(pending), err)
			}
			if pending[0].Attempts != 0 {
				t.Fatalf("a send refused for leadership counted as an attempt: %+v", pending[0])
			}
		})
	}
}
