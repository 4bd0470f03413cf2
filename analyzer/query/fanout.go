package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"golang.org/x/sync/errgroup"
)

// Call is one query of a fan-out: a range query over Range when its Step
// is set, else an instant query at At.
type Call struct {
	Expr  string
	At    time.Time
	Range Range
	// stored names the metric of a Stored call; window is its width.
	stored string
	window time.Duration
	// folded says the caller folds the answer a part at a time (Folded).
	folded bool
}

// Instant is the call of expr at t.
func Instant(expr string, t time.Time) Call { return Call{Expr: expr, At: t} }

// Ranged is the call of expr over r.
func Ranged(expr string, r Range) Call { return Call{Expr: expr, Range: r} }

// Stored is the call for the samples stored of metric in the left-open
// window (end-w, end], as a model.Matrix: read through a SampleReader
// where q is one, else (or where it answers errors.ErrUnsupported) as the
// instant query metric[w] at end, which selects the same samples.
func Stored(metric string, w time.Duration, end time.Time) Call {
	return Call{Expr: fmt.Sprintf("%s[%dms]", metric, w.Milliseconds()), At: end, stored: metric, window: w}
}

// Folded is c for a caller whose apply folds what it is handed and keeps
// nothing of it: Fan then hands the answer on a series (or a sample) at a
// time where q is a Streamer, so that it is never held whole, as it does
// for a Stored call read through a SampleReader.
func (c Call) Folded() Call {
	c.folded = true
	return c
}

func (c Call) run(ctx context.Context, q Querier) (model.Value, error) {
	if sr, ok := q.(SampleReader); ok && c.stored != "" {
		var m model.Matrix
		err := sr.ReadSamples(ctx, c.stored, c.At.Add(-c.window+time.Millisecond), c.At, func(l model.Metric, v []model.SamplePair) error {
			if len(v) > 0 {
				m = append(m, &model.SampleStream{Metric: l, Values: v})
			}
			return nil
		})
		if !errors.Is(err, errors.ErrUnsupported) {
			return m, err
		}
	}
	return c.query(ctx, q)
}

// query runs the call through the query API.
func (c Call) query(ctx context.Context, q Querier) (model.Value, error) {
	if c.Range.Step > 0 {
		return q.QueryRange(ctx, c.Expr, c.Range)
	}
	return q.Query(ctx, c.Expr, c.At)
}

// Fan runs calls through q, at most parallel at a time, and hands each
// answer to apply as it arrives, with the call's index. apply is called
// one answer at a time, so it may fold into shared state without a lock;
// a query's slot is freed only once its answer is applied, so at most
// parallel answers are held at once. A Stored call that q reads through a
// SampleReader, and a Folded call that q answers as a Streamer, reach
// apply a series at a time, each a model.Matrix of one series (a Folded
// instant query's samples each a model.Vector of one), as the series
// arrive: a fleet's week of one metric is then never held whole. The
// calls are one cycle (WithCycle): what their answers hold is counted
// together against the querier's Limits. The first error, of a query or of
// apply, cancels the calls still running and is the one returned: every
// caller of Fan needs all its answers or none.
func Fan(ctx context.Context, q Querier, calls []Call, parallel int, apply func(i int, v model.Value) error) error {
	ctx, _ = WithCycle(ctx)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(parallel, 1))
	var mu sync.Mutex
	for i, c := range calls {
		g.Go(func() error {
			err := c.stream(gctx, q, func(v model.Value) error {
				mu.Lock()
				defer mu.Unlock()
				return apply(i, v)
			})
			if !errors.Is(err, errors.ErrUnsupported) {
				return err
			}
			v, err := c.query(gctx, q)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			return apply(i, v)
		})
	}
	return g.Wait()
}

// stream hands c's answer to each a part at a time where c is a Stored
// call and q a SampleReader, or c a Folded call and q a Streamer; else
// (or where q says so) it returns errors.ErrUnsupported having handed
// nothing on.
func (c Call) stream(ctx context.Context, q Querier, each func(model.Value) error) error {
	if sr, ok := q.(SampleReader); ok && c.stored != "" {
		err := sr.ReadSamples(ctx, c.stored, c.At.Add(-c.window+time.Millisecond), c.At, func(l model.Metric, v []model.SamplePair) error {
			if len(v) == 0 {
				return nil
			}
			return each(model.Matrix{{Metric: l, Values: v}})
		})
		if !errors.Is(err, errors.ErrUnsupported) {
			return err
		}
	}
	st, ok := q.(Streamer)
	switch {
	case !ok || !c.folded:
		return errors.ErrUnsupported
	case c.Range.Step > 0:
		return st.QueryRangeStream(ctx, c.Expr, c.Range, each)
	}
	return st.QueryStream(ctx, c.Expr, c.At, each)
}

// FanEach is Fan for a caller that can use some answers without the
// rest: every call runs whatever the others do, each answer reaches
// apply, and the errors of the queries that failed come back joined, so
// the caller can say which figures it lacks. The calls are one cycle, as
// Fan's.
func FanEach(ctx context.Context, q Querier, calls []Call, parallel int, apply func(i int, v model.Value)) error {
	ctx, _ = WithCycle(ctx)
	var g errgroup.Group
	g.SetLimit(max(parallel, 1))
	var mu sync.Mutex
	var errs []error
	cycleFull := false
	for i, c := range calls {
		g.Go(func() error {
			v, err := c.run(ctx, q)
			mu.Lock()
			defer mu.Unlock()
			var ce *CapError
			switch {
			case errors.As(err, &ce) && ce.Scope == "cycle" && cycleFull:
				return nil // the cycle's cap, said once
			case err != nil:
				cycleFull = cycleFull || (ce != nil && ce.Scope == "cycle")
				errs = append(errs, err)
				return nil
			}
			apply(i, v)
			return nil
		})
	}
	_ = g.Wait() // no call returns an error: they are joined below
	return errors.Join(errs...)
}
