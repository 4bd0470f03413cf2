package demo

import (
	"context"
	"log/slog"
)

// atLeast passes on only records at min or above. The demo's summary says
// what happened; the TSDB's compaction messages and one line per
// escalation step would bury it (the audit log has every step).
func atLeast(l *slog.Logger, min slog.Level) *slog.Logger {
	return slog.New(levelHandler{min: min, next: l.Handler()})
}

type levelHandler struct {
	min  slog.Level
	next slog.Handler
}

func (h levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h levelHandler) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithAttrs(as)}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{min: h.min, next: h.next.WithGroup(name)}
}
