// Package rungroup runs a command's long-lived goroutines (its listeners,
// its schedule, its lease, its background refreshes) as one oklog/run
// group, as Prometheus' main does: the first of them to return ends the
// others, and Run returns only once every one has. Nothing a command
// starts outlives it, so a lease is released and a server is shut down
// before the process exits.
package rungroup

import (
	"context"

	"github.com/oklog/run"
)

// Group is the set of a command's goroutines. The zero value is not
// usable: make one with New.
type Group struct {
	ctx context.Context
	g   run.Group
}

// New returns an empty group whose goroutines run under ctx.
func New(ctx context.Context) *Group { return &Group{ctx: ctx} }

// Go adds fn, to run until its context ends: it ends when the group's
// context does, or when another member returns. fn's error, if it is the
// first member to return, is Run's.
func (g *Group) Go(fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(g.ctx)
	g.g.Add(func() error {
		defer cancel()
		return fn(ctx)
	}, func(error) { cancel() })
}

// Loop adds fn, a loop that runs until its context ends and returns
// nothing.
func (g *Group) Loop(fn func(ctx context.Context)) {
	g.Go(func(ctx context.Context) error {
		fn(ctx)
		return nil
	})
}

// Run starts every member and waits for all of them; it returns the error
// of the first to return. An empty group returns at once.
func (g *Group) Run() error {
	return g.g.Run()
}
