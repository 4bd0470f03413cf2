package secret

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/termsafe"
)

type stringer string

func (s stringer) String() string { return string(s) }

// TestHandlerRedactsEveryValue: whatever a call site logs (the message, a
// string, an error, a Stringer, a struct, a group, an attribute given to
// With), the line holds no secret, in text and JSON alike, and names and
// text are bounded.
func TestHandlerRedactsEveryValue(t *testing.T) {
	Register("hub-t0ken-value")
	long := strings.Repeat("n", 100_000)
	for _, tc := range []struct {
		name  string
		log   func(l *slog.Logger)
		never string
		want  string
	}{
		{"message", func(l *slog.Logger) { l.Info("Hub answered: Authorization: token abcdefabcdef12") }, "abcdefabcdef12", "Authorization: " + Mask},
		{"string", func(l *slog.Logger) { l.Info("x", "detail", "post http://u:hunter22@hook.example/x") }, "hunter22", "hook.example"},
		{"known value", func(l *slog.Logger) { l.Info("x", "body", "echo hub-t0ken-value back") }, "hub-t0ken-value", "echo"},
		{"error", func(l *slog.Logger) { l.Warn("x", "err", errors.New("401: password=letmein")) }, "letmein", "401"},
		{"wrapped error", func(l *slog.Logger) {
			l.Warn("x", "err", fmt.Errorf("scancel: %w", errors.New("Bearer aaaaaaaaaaaaaaaaaaaaaaaa")))
		}, "aaaaaaaaaaaaaaaaaaaaaaaa", "scancel"},
		{"stringer", func(l *slog.Logger) { l.Info("x", "u", stringer("https://a:b1gsecret@h/")) }, "b1gsecret", "https://"},
		{"struct", func(l *slog.Logger) {
			l.Info("x", "req", struct{ Header string }{"X-Api-Key: 0123456789"})
		}, "0123456789", "X-Api-Key"},
		{"group", func(l *slog.Logger) { l.Info("x", slog.Group("hub", "reply", "token=zzzzzzzzzzzz")) }, "zzzzzzzzzzzz", "hub"},
		{"with", func(l *slog.Logger) { l.With("url", "http://x:pw123456@h").Info("x") }, "pw123456", "http://x:"},
		{"with group", func(l *slog.Logger) { l.WithGroup("g").Info("x", "v", "hub-t0ken-value") }, "hub-t0ken-value", Mask},
		{"long job name", func(l *slog.Logger) { l.Info("x", "job", long) }, strings.Repeat("n", termsafe.MaxName+1), "100000 bytes"},
		{"long detail", func(l *slog.Logger) { l.Info("x", "detail", long) }, strings.Repeat("n", MaxLogValue+1), "100000 bytes"},
		{"long message", func(l *slog.Logger) { l.Info(long) }, strings.Repeat("n", MaxLogValue+1), "100000 bytes"},
		{"plain", func(l *slog.Logger) { l.Info("escalation step", "state", "done", "n", 3) }, Mask, "escalation step"},
	} {
		for _, format := range []string{"text", "json"} {
			var buf bytes.Buffer
			var h slog.Handler = slog.NewTextHandler(&buf, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&buf, nil)
			}
			tc.log(slog.New(Handler(h)))
			out := buf.String()
			if strings.Contains(out, tc.never) || !strings.Contains(out, tc.want) {
				t.Errorf("%s %s: %.300q: want %q, never %.40q", tc.name, format, out, tc.want, tc.never)
			}
			if format == "json" && json.Unmarshal(buf.Bytes(), new(map[string]any)) != nil {
				t.Errorf("%s: not JSON: %.300s", tc.name, out)
			}
		}
	}
}
