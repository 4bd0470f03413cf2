package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

func analyzeCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("analyze", "Classify GPU waste per job over a time window (one shot) and print the findings.")
	var (
		promURL, storage, from, to, format, cfgPath string
		timeout                                     time.Duration
	)
	cmd.Flag("prometheus.url", "Prometheus-compatible API to read telemetry from (Prometheus, Thanos, Mimir, VictoriaMetrics).").StringVar(&promURL)
	cmd.Flag("storage.path", "Embedded telemetry store to read instead (the --storage.path of `gpuwatch agent`, or its tsdb folder).").StringVar(&storage)
	cmd.Flag("from", "Start of the window: RFC 3339, now, or relative such as -7d.").Default("-7d").StringVar(&from)
	cmd.Flag("to", "End of the window: RFC 3339, now, or relative such as -1h.").Default("now").StringVar(&to)
	cmd.Flag("format", "Output: table (aligned, for people) or json ({\"findings\": [...]}).").Default("table").EnumVar(&format, "table", "json")
	cmd.Flag("config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	cmd.Flag("query.timeout", "Timeout of one query.").Default("2m").DurationVar(&timeout)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := loggerFrom(ctx)
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
		q, closeQ, err := openQuerier(promURL, storage, timeout, logger)
		if err != nil {
			return err
		}
		defer closeQ()
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
