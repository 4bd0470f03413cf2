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

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

// OpenStore opens the embedded telemetry store in dir for reading. A binary
// built without the embedded store passes nil to Analyze.
type OpenStore func(dir string, timeout time.Duration, logger *slog.Logger) (query.Querier, io.Closer, error)

// Analyze is `analyze`. With open nil it reads only from Prometheus and has
// no --storage.path.
func Analyze(open OpenStore) command.Command {
	return func(app *kingpin.Application) (string, func(ctx context.Context) error) {
		return analyze(app, open)
	}
}

func analyze(app *kingpin.Application, open OpenStore) (string, func(ctx context.Context) error) {
	cmd := app.Command("analyze", "Classify GPU waste per job over a time window (one shot) and print the findings.")
	var (
		promURL, storage, from, to, format, cfgPath string
		timeout                                     time.Duration
	)
	cmd.Flag("prometheus.url", "Prometheus-compatible API to read telemetry from (Prometheus, Thanos, Mimir, VictoriaMetrics).").StringVar(&promURL)
	if open != nil {
		cmd.Flag("storage.path", "Embedded telemetry store to read instead (the --storage.path of `gpuwatch agent`, or its tsdb folder).").StringVar(&storage)
	}
	cmd.Flag("from", "Start of the window: RFC 3339, now, or relative such as -7d.").Default("-7d").StringVar(&from)
	cmd.Flag("to", "End of the window: RFC 3339, now, or relative such as -1h.").Default("now").StringVar(&to)
	cmd.Flag("format", "Output: table (aligned, for people) or json ({\"findings\": [...]}).").Default("table").EnumVar(&format, "table", "json")
	cmd.Flag("config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	cmd.Flag("query.timeout", "Timeout of one query.").Default("2m").DurationVar(&timeout)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := command.LoggerFrom(ctx)
		switch {
		case open == nil && promURL == "":
			return &cli.UsageError{Err: errors.New("--prometheus.url is required")}
		case (promURL == "") == (storage == ""):
			return &cli.UsageError{Err: errors.New("set exactly one of --prometheus.url and --storage.path")}
		}
		now := time.Now()
		f, err := present.ParseTime(from, now)
		if err != nil {
			return &cli.UsageError{Err: fmt.Errorf("--from: %w", err)}
		}
		t, err := present.ParseTime(to, now)
		if err != nil {
			return &cli.UsageError{Err: fmt.Errorf("--to: %w", err)}
		}
		if !t.After(f) {
			return &cli.UsageError{Err: fmt.Errorf("--to (%s) must be after --from (%s)", t.Format(time.RFC3339), f.Format(time.RFC3339))}
		}
		cfg := config.Default()
		if cfgPath != "" {
			if cfg, err = config.Load(cfgPath); err != nil {
				return &cli.UsageError{Err: err}
			}
		}
		var q query.Querier
		if promURL != "" {
			c, err := promapi.New(promURL, promapi.Options{Timeout: timeout, Logger: logger})
			if err != nil {
				return &cli.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
			}
			q = c
		} else {
			if _, err := os.Stat(storage); err != nil {
				return &cli.UsageError{Err: fmt.Errorf("--storage.path: %w", err)}
			}
			// Accept the agent's --storage.path as well as its tsdb folder.
			if fi, err := os.Stat(filepath.Join(storage, "tsdb")); err == nil && fi.IsDir() {
				storage = filepath.Join(storage, "tsdb")
			}
			db, closer, err := open(storage, timeout, logger)
			if err != nil {
				return fmt.Errorf("%w (is a gpuwatch agent holding it? query its data through Prometheus instead)", err)
			}
			defer closer.Close()
			q = db
		}
		e, err := engine.New(engine.Options{Querier: q, Config: cfg, Logger: logger})
		if err != nil {
			return err
		}
		fs, err := e.Analyze(ctx, f, t)
		if err != nil {
			return err
		}
		if format == "json" {
			return present.JSON(os.Stdout, fs)
		}
		return present.Table(os.Stdout, fs)
	}
}
