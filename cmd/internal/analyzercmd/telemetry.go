package analyzercmd

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// OpenStore opens the embedded telemetry store in dir for reading. A binary
// built without the embedded store passes nil.
type OpenStore func(dir string, timeout time.Duration, logger *slog.Logger) (query.Querier, io.Closer, error)

// TelemetryFlags are the one-shot commands' telemetry source and window.
type TelemetryFlags struct {
	*SourceFlags
	from, to string
	timeout  time.Duration
	limits   *QueryLimitFlags
}

// RegisterTelemetryFlags adds the telemetry source and window flags to cmd;
// --tsdb.path only when open is not nil.
func RegisterTelemetryFlags(cmd *kingpin.CmdClause, open OpenStore) *TelemetryFlags {
	f := &TelemetryFlags{SourceFlags: RegisterSourceFlags(cmd, open)}
	cmd.Flag("from", "Start of the window: RFC 3339, now, or relative such as -7d. The window is judged on the analyzer's step grid, as the daemon and the reports judge it: it holds the steps that start in it (docs/accounting.md).").Default("-7d").StringVar(&f.from)
	cmd.Flag("to", "End of the window: RFC 3339, now, or relative such as -1h; now ends at the last complete step.").Default("now").StringVar(&f.to)
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
	return f.open(logger, f.timeout, lim, true)
}
