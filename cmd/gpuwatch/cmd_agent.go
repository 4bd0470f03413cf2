package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/agent"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func agentCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("agent", "Single-node mode: the exporter, an embedded telemetry store and analyzer cycles in one process.")
	exp := cli.Register(cmd)
	var (
		dir, cfgPath      string
		storeIv, retained time.Duration
	)
	cmd.Flag("storage.path", "Folder of the embedded telemetry store (tsdb/) and the state database (gpuwatch.db).").Default("gpuwatch-data").StringVar(&dir)
	cmd.Flag("storage.interval", "Resolution of the telemetry kept in the embedded store.").Default("30s").DurationVar(&storeIv)
	cmd.Flag("storage.retention", "How long raw telemetry is kept in the embedded store.").Default("360h").DurationVar(&retained)
	cmd.Flag("analyzer.config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(&cfgPath)
	return cmd.FullCommand(), func(ctx context.Context) error {
		if storeIv < time.Second {
			return &clikit.UsageError{Err: fmt.Errorf("--storage.interval must be at least 1s, got %s", storeIv)}
		}
		if retained < storeIv {
			return &clikit.UsageError{Err: fmt.Errorf("--storage.retention must be at least --storage.interval (%s), got %s", storeIv, retained)}
		}
		cfg := config.Default()
		if cfgPath != "" {
			var err error
			if cfg, err = config.Load(cfgPath); err != nil {
				return &clikit.UsageError{Err: err}
			}
		}
		return agent.Run(ctx, agent.Options{Exporter: exp, Dir: dir, StoreInterval: storeIv, Retention: retained,
			Config: cfg, Logger: loggerFrom(ctx), Version: version})
	}
}
