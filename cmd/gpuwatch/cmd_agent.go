package main

import (
	"context"
	"fmt"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/agent"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/cmd/internal/analyzercmd"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func agentCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("agent", "Single-node mode: the exporter, an embedded telemetry store and analyzer cycles in one process.")
	exp := cli.Register(cmd)
	var (
		tsdb, state, cfgPath string
		storeIv, retained    time.Duration
	)
	cmd.Flag("tsdb.path", "Folder of the embedded telemetry store (created when missing); `gpuwatch analyze`, `job` and `plan` read it with their --tsdb.path.").Default("gpuwatch-data/tsdb").StringVar(&tsdb)
	cmd.Flag("storage.path", "Path of the state database (SQLite, created when missing): findings and analyzer state, as `gpuwatch report` and `audit` read it with their --storage.path.").Default("gpuwatch-data/gpuwatch.db").StringVar(&state)
	cmd.Flag("tsdb.interval", "Resolution of the telemetry kept in the embedded store.").Default("30s").DurationVar(&storeIv)
	command.OldSpelling(cmd, "storage.interval", "tsdb.interval").DurationVar(&storeIv)
	cmd.Flag("tsdb.retention", "How long raw telemetry is kept in the embedded store.").Default("360h").DurationVar(&retained)
	command.OldSpelling(cmd, "storage.retention", "tsdb.retention").DurationVar(&retained)
	cmd.Flag("analyzer.config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(&cfgPath)
	return cmd.FullCommand(), func(ctx context.Context) error {
		if storeIv < time.Second {
			return &clikit.UsageError{Err: fmt.Errorf("--tsdb.interval must be at least 1s, got %s", storeIv)}
		}
		if retained < storeIv {
			return &clikit.UsageError{Err: fmt.Errorf("--tsdb.retention must be at least --tsdb.interval (%s), got %s", storeIv, retained)}
		}
		if err := analyzercmd.CheckStatePath(state); err != nil {
			return err
		}
		dir, err := analyzercmd.TSDBDir(tsdb, false)
		if err != nil {
			return err
		}
		cfg := config.Default()
		if cfgPath != "" {
			if cfg, err = config.Load(cfgPath); err != nil {
				return &clikit.UsageError{Err: err}
			}
		}
		return agent.Run(ctx, agent.Options{Exporter: exp, TSDBDir: dir, StatePath: state, StoreInterval: storeIv, Retention: retained,
			Config: cfg, Logger: loggerFrom(ctx), Version: version})
	}
}
