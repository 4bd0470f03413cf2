package clikit

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gpuwatch/gpuwatch/internal/secret"
)

// LogFlags are --log.level and --log.format, shared by both binaries.
type LogFlags struct{ level, format string }

// RegisterLogFlags adds the logging flags to app or a subcommand.
func RegisterLogFlags(g FlagGroup) *LogFlags {
	l := &LogFlags{}
	g.Flag("log.level", "Only log messages with the given severity or above: debug, info, warn, error.").Default("info").EnumVar(&l.level, "debug", "info", "warn", "error")
	g.Flag("log.format", "Output format of log messages: logfmt or json.").Default("logfmt").EnumVar(&l.format, "logfmt", "json")
	return l
}

// Logger builds the slog logger the flags ask for, writing to stderr. Every
// line passes through secret.Handler: a secret the process knows, or one
// in a peer's echo, never reaches the log, whichever call site logs it.
func (l *LogFlags) Logger() (*slog.Logger, error) { return l.loggerTo(os.Stderr) }

func (l *LogFlags) loggerTo(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if l.format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(secret.Handler(h)), nil
}
