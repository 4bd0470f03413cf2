package embedded

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLibraryLoggerLowersInfoOnly: the store's INFO is DEBUG to the user, its
// warnings and errors stay what they are.
func TestLibraryLoggerLowersInfoOnly(t *testing.T) {
	for _, tc := range []struct {
		level     slog.Level
		want, not []string
	}{
		{slog.LevelInfo, []string{"level=WARN msg=w", "level=ERROR msg=e"}, []string{"msg=i", "msg=d"}},
		{slog.LevelDebug, []string{"level=DEBUG msg=i", "level=WARN msg=w", "level=ERROR msg=e"}, []string{"level=INFO"}},
	} {
		var buf bytes.Buffer
		l := libraryLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))).With("component", "tsdb")
		l.Debug("d")
		l.Info("i")
		l.Warn("w")
		l.Error("e")
		for _, w := range tc.want {
			if !strings.Contains(buf.String(), w) {
				t.Errorf("at %s: lacks %q:\n%s", tc.level, w, buf.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(buf.String(), n) {
				t.Errorf("at %s: has %q:\n%s", tc.level, n, buf.String())
			}
		}
	}
}
