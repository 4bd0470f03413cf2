package simload

import (
	"context"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
)

// Fanout hands every collection to each of its sinks, each in a goroutine
// of its own, so that one replay written into several stores takes about
// as long as the slowest of them rather than their sum. The collections
// are shared: no sink may change one (Format's sinks build what they
// change anew).
type Fanout struct {
	ctx  context.Context
	g    *errgroup.Group
	in   []chan collection
	once sync.Once
	err  error
}

type collection struct {
	t    time.Time
	fams []*dto.MetricFamily
}

// fanoutQueue is how many collections a sink may fall behind the replay:
// enough to ride out one slow commit, few enough to bound the memory.
const fanoutQueue = 8

// NewFanout starts one goroutine per sink; Close joins them.
func NewFanout(ctx context.Context, sinks ...Sink) *Fanout {
	g, gctx := errgroup.WithContext(ctx)
	f := &Fanout{ctx: gctx, g: g}
	for _, s := range sinks {
		ch := make(chan collection, fanoutQueue)
		f.in = append(f.in, ch)
		g.Go(func() error {
			for c := range ch {
				if err := s(c.t, c.fams); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return f
}

// Sink queues one collection for every sink. It fails once a sink has
// failed (with that sink's error) or the context is done. It is called
// from one goroutine, and not after Close.
func (f *Fanout) Sink(t time.Time, fams []*dto.MetricFamily) error {
	if f.ctx.Err() != nil {
		return f.stop()
	}
	c := collection{t: t, fams: fams}
	for _, ch := range f.in {
		select {
		case ch <- c:
		case <-f.ctx.Done():
			return f.stop()
		}
	}
	return nil
}

// stop joins the sinks once one failed or the context is done, and says
// why: the failing sink's error, else the context's.
func (f *Fanout) stop() error {
	if err := f.Close(); err != nil {
		return err
	}
	return f.ctx.Err()
}

// Close waits until every sink has written what it was given and returns
// the first error of any.
func (f *Fanout) Close() error {
	f.once.Do(func() {
		for _, ch := range f.in {
			close(ch)
		}
		f.err = f.g.Wait()
	})
	return f.err
}
