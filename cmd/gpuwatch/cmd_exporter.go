package main

import (
	"context"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

func exporterCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("exporter", "Export per-GPU telemetry for Prometheus under dcgm-exporter's metric names (the node agent).")
	cfg := cli.Register(cmd)
	return cmd.FullCommand(), func(ctx context.Context) error {
		return cli.Run(ctx, cfg, loggerFrom(ctx), version, cli.Hooks{})
	}
}
