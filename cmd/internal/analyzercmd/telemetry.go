package analyzercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// OpenStore opens the embedded telemetry store in dir for reading. A binary
// built without the embedded store passes nil.
type OpenStore func(dir string, timeout time.Duration, logger *slog.Logger) (query.Querier, io.Closer, error)

// TelemetryFlags are the one-shot commands' telemetry source and window.
type TelemetryFlags struct {
	promURL, storage, from, to string
	timeout                    time.Duration
	openStore                  OpenStore
	limits                     *QueryLimitFlags
}

// RegisterTelemetryFlags adds the telemetry source and window flags to cmd;
// --storage.path only when open is not nil.
func RegisterTelemetryFlags(cmd *kingpin.CmdClause, open OpenStore) *TelemetryFlags {
	f := &TelemetryFlags{openStore: open}
	cmd.Flag("prometheus.url", "Prometheus-compatible API to read telemetry from (Prometheus, Thanos, Mimir, VictoriaMetrics).").StringVar(&f.promURL)
	if open != nil {
		cmd.Flag("storage.path", "Embedded telemetry store to read instead (the --storage.path of `gpuwatch agent`, or its tsdb folder).").StringVar(&f.storage)
	}
	cmd.Flag("from", "Start of the window: RFC 3339, now, or relative such as -7d.").Default("-7d").StringVar(&f.from)
	cmd.Flag("to", "End of the window: RFC 3339, now, or relative such as -1h.").Default("now").StringVar(&f.to)
	cmd.Flag("query.timeout", "Timeout of one query.").Default("2m").DurationVar(&f.timeout)
	f.limits = RegisterQueryLimitFlags(cmd)
	return f
}

// Window parses --from and --to against now.
func (f *TelemetryFlags) Window(now time.Time) (time.Time, time.Time, error) {
	from, err := present.ParseTime(f.from, now)
	if err != nil {
		return from, from, &clikit.UsageError{Err: fmt.Errorf("--from: %w", err)}
	}
	to, err := present.ParseTime(f.to, now)
	if err != nil {
		return from, to, &clikit.UsageError{Err: fmt.Errorf("--to: %w", err)}
	}
	if !to.After(from) {
		return from, to, &clikit.UsageError{Err: fmt.Errorf("--to (%s) must be after --from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339))}
	}
	return from, to, nil
}

// Open returns the querier the flags name and a function that closes it.
func (f *TelemetryFlags) Open(logger *slog.Logger) (query.Querier, func(), error) {
	lim, err := f.limits.Limits()
	if err != nil {
		return nil, nil, err
	}
	return openTelemetry(logger, f.promURL, f.storage, f.timeout, f.openStore, lim, true)
}

// OpenTelemetry returns the querier for --prometheus.url promURL or
// --storage.path storage (exactly one set; storage only where open is not
// nil) and a function that closes it.
func OpenTelemetry(logger *slog.Logger, promURL, storage string, timeout time.Duration, open OpenStore) (query.Querier, func(), error) {
	return openTelemetry(logger, promURL, storage, timeout, open, query.Limits{}, true)
}

// OpenTelemetryUnchecked is OpenTelemetry without the first query to
// Prometheus: for `gpuwatch job`, for which a Prometheus that is away is a
// case it handles (the summary in AdminComment, or a note with --summary),
// not a wrong flag.
func OpenTelemetryUnchecked(logger *slog.Logger, promURL, storage string, timeout time.Duration, open OpenStore) (query.Querier, func(), error) {
	return openTelemetry(logger, promURL, storage, timeout, open, query.Limits{}, false)
}

func openTelemetry(logger *slog.Logger, promURL, storage string, timeout time.Duration, open OpenStore, lim query.Limits, ping bool) (query.Querier, func(), error) {
	switch {
	case open == nil && promURL == "":
		return nil, nil, &clikit.UsageError{Err: errors.New("--prometheus.url is required")}
	case (promURL == "") == (storage == ""):
		return nil, nil, &clikit.UsageError{Err: errors.New("set exactly one of --prometheus.url and --storage.path")}
	}
	if promURL != "" {
		c, err := promapi.New(promURL, promapi.Options{Timeout: timeout, Logger: logger, Limits: lim})
		if err != nil {
			return nil, nil, &clikit.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
		}
		// One trivial query first, so that a wrong URL is one line naming
		// the flag, the URL and the cause, not a failed analysis query.
		if !ping {
			return c, func() {}, nil
		}
		if err := c.Ping(context.Background()); err != nil {
			err = fmt.Errorf("--prometheus.url: %w", err)
			var pe *promapi.PingError
			if errors.As(err, &pe) && pe.Answered {
				return nil, nil, &clikit.UsageError{Err: err}
			}
			return nil, nil, err
		}
		return c, func() {}, nil
	}
	if _, err := os.Stat(storage); err != nil {
		return nil, nil, &clikit.UsageError{Err: fmt.Errorf("--storage.path: %w", err)}
	}
	// Accept the agent's --storage.path as well as its tsdb folder.
	if fi, err := os.Stat(filepath.Join(storage, "tsdb")); err == nil && fi.IsDir() {
		storage = filepath.Join(storage, "tsdb")
	}
	db, closer, err := open(storage, timeout, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (is a gpuwatch agent holding it? query its data through Prometheus instead)", err)
	}
	return db, func() { closer.Close() }, nil
}
