package secret

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gpuwatch/gpuwatch/internal/termsafe"
	"github.com/gpuwatch/gpuwatch/schema"
)

// MaxLogValue bounds any one text value of a log line (an error body, a
// scheduler's message): a peer's 10 MB answer is not copied into the log.
const MaxLogValue = 8 << 10

// nameKeys are the log attributes that hold names someone else chose (the
// schema's label names, and the short keys log lines use); they are
// bounded at termsafe.MaxName.
var nameKeys = map[string]bool{schema.LabelUser: true, schema.LabelTeam: true, schema.LabelPod: true,
	schema.LabelNamespace: true, schema.LabelHostname: true, schema.LabelJob: true, schema.LabelJobName: true,
	schema.LabelAccount: true, "job": true, "node": true, "name": true}

// Handler wraps next so that no log line holds a secret: the message and
// every attribute value (strings, errors, Stringers, groups, the attributes
// of With) pass through String, and text values are bounded. Every
// gpuwatch logger is built on it, so no call site has to remember.
func Handler(next slog.Handler) slog.Handler { return &handler{next: next} }

type handler struct{ next slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, termsafe.Bound(String(r.Message), MaxLogValue), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return &handler{next: h.next.WithAttrs(red)}
}

func (h *handler) WithGroup(name string) slog.Handler { return &handler{next: h.next.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	limit := MaxLogValue
	if nameKeys[a.Key] {
		limit = termsafe.MaxName
	}
	text := func(s string) slog.Attr { return slog.String(a.Key, termsafe.Bound(String(s), limit)) }
	switch v.Kind() {
	case slog.KindString:
		return text(v.String())
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = redactAttr(x)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return text(x.Error())
		case fmt.Stringer:
			return text(x.String())
		case nil:
			return slog.Attr{Key: a.Key, Value: v}
		default:
			// A struct or slice is shown as the handler prints it; it is
			// replaced by its text only when that text held a secret.
			if s := fmt.Sprintf("%+v", x); String(s) != s || len(s) > limit {
				return text(s)
			}
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
