package embedded

import (
	"context"
	"log/slog"
)

// libraryLogger is the logger the TSDB and the PromQL engine get: their INFO
// records (each block found on open, every WAL segment replayed, each
// compaction) are DEBUG to a gpuwatch user, who asked a command for an
// answer, not for the store's housekeeping; `gpuwatch job` used to print 95
// such lines before its view. Warnings and errors keep their level, and
// --log.level=debug shows the rest.
func libraryLogger(l *slog.Logger) *slog.Logger {
	return slog.New(demoteInfo{next: l.Handler()})
}

// demoteInfo passes records on with INFO (and anything between INFO and
// WARN) lowered to DEBUG.
type demoteInfo struct{ next slog.Handler }

func demoted(l slog.Level) slog.Level {
	if l >= slog.LevelInfo && l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, demoted(l))
}

func (h demoteInfo) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demoted(r.Level)
	return h.next.Handle(ctx, r)
}

func (h demoteInfo) WithAttrs(as []slog.Attr) slog.Handler {
	return demoteInfo{next: h.next.WithAttrs(as)}
}

func (h demoteInfo) WithGroup(name string) slog.Handler {
	return demoteInfo{next: h.next.WithGroup(name)}
}
