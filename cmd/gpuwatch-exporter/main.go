// Command gpuwatch-exporter is the lean node agent: the same exporter as
// `gpuwatch exporter`, without the analyzer's dependencies, for DaemonSets
// and systemd units.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

var version = "dev"

func main() {
	kingpin.EnableFileExpansion = false // an argument starting with @ is a value, never a file to read
	app := kingpin.New("gpuwatch-exporter", "Export per-GPU telemetry for Prometheus under dcgm-exporter's metric names, with who holds each GPU.")
	app.Version(version)
	app.HelpFlag.Short('h')
	cfg := cli.Register(app)
	logs := cli.RegisterLogFlags(app)
	if _, err := app.Parse(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch-exporter: %v (see --help)\n", err)
		os.Exit(2)
	}
	logger, err := logs.Logger()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch-exporter: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cli.Run(ctx, cfg, logger, version, cli.Hooks{}); err != nil {
		fmt.Fprintf(os.Stderr, "gpuwatch-exporter: %v\n", err)
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
