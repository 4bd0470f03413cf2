package clikit

import (
	"fmt"
	"log/slog"
	"os"
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

// Logger builds the slog logger the flags ask for, writing to stderr.
func (l *LogFlags) Logger() (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log.level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if l.format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
}
