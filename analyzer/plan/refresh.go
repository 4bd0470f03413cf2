package plan

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// Refresher keeps a plan of the trailing window current: it plans in the
// background every Every and hands out the latest plan, so neither a page
// view nor a scrape waits for a week of telemetry to be read.
type Refresher struct {
	Querier query.Querier
	Options Options
	Window  time.Duration // default 7 days
	Every   time.Duration // default 1 hour
	Now     func() time.Time
	Logger  *slog.Logger
	// Metrics, when set, publishes each new plan.
	Metrics *Metrics
	// Ready, when set, is asked after a refresh failed (the daemon pings
	// its Prometheus): when it fails too, its error, one line, is the
	// refresh's, instead of one error per query that could not be sent.
	Ready func(context.Context) error

	mu   sync.Mutex
	last *Plan
	err  error
}

// ErrNoPlan is returned before the first plan is ready.
var ErrNoPlan = errors.New("no plan yet: the first one is being computed")

// Plan returns the latest plan.
func (r *Refresher) Plan(context.Context) (*Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		if r.err != nil {
			return nil, r.err
		}
		return nil, ErrNoPlan
	}
	return r.last, nil
}

// Refresh plans the window ending now once.
func (r *Refresher) Refresh(ctx context.Context) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	w := r.Window
	if w <= 0 {
		w = 7 * 24 * time.Hour
	}
	to := now().Truncate(time.Hour)
	p, err := Build(ctx, r.Querier, to.Add(-w), to, r.Options)
	if err != nil {
		if why := r.ready(ctx); why != nil {
			err = why
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err
		return err
	}
	r.last, r.err = p, nil
	if r.Metrics != nil {
		r.Metrics.Observe(p)
	}
	return nil
}

func (r *Refresher) ready(ctx context.Context) error {
	if r.Ready == nil {
		return nil
	}
	return r.Ready(ctx)
}

// Run refreshes until ctx ends.
func (r *Refresher) Run(ctx context.Context) {
	every := r.Every
	if every <= 0 {
		every = time.Hour
	}
	logger := r.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			logRefresh(logger, err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// logRefresh logs a refresh that gave no plan: a fleet too young to plan
// is expected for its first day and said once an hour at INFO (the page
// and the reports show the reason); any other failure is a warning.
func logRefresh(logger *slog.Logger, err error) {
	var short *ShortHistoryError
	if errors.As(err, &short) {
		logger.Info("no capacity plan yet", "reason", err)
		return
	}
	logger.Warn("capacity plan failed", "err", err)
}
