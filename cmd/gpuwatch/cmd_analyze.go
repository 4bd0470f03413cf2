package main

import (
	"context"
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
	var format, cfgPath string
	tf := registerTelemetryFlags(cmd)
	cmd.Flag("format", "Output: table (aligned, for people) or json ({\"findings\": [...]}).").Default("table").EnumVar(&format, "table", "json")
	cmd.Flag("analyzer.config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	oldSpelling(cmd, "config", "analyzer.config").StringVar(&cfgPath)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := loggerFrom(ctx)
		f, t, err := tf.window(time.Now())
		if err != nil {
			return err
		}
		cfg := config.Default()
		if cfgPath != "" {
			if cfg, err = config.Load(cfgPath); err != nil {
				return &cli.UsageError{Err: err}
			}
		}
		q, closeQ, err := tf.open(logger)
		if err != nil {
			return err
		}
		defer closeQ()
		e, err := engine.New(engine.Options{Querier: q, Config: cfg, Logger: logger})
		if err != nil {
			return err
		}
		a, err := e.AnalyzeWindow(ctx, f, t)
		if err != nil {
			return err
		}
		if format == "json" {
			return present.JSON(os.Stdout, a.Findings, &a.Coverage)
		}
		return present.Table(os.Stdout, a.Findings, &a.Coverage)
	}
}
