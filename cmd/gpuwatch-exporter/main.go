// Command gpuwatch-exporter is the lean node agent: the same exporter as
// `gpuwatch exporter`, without the analyzer's dependencies, for DaemonSets
// and systemd units.
package main

import (
	"context"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/exporter/cli"
	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func newApp(stderr io.Writer) *command.App {
	return command.New("gpuwatch-exporter", "Export per-GPU telemetry for Prometheus under dcgm-exporter's metric names, with who holds each GPU.", stderr,
		exporter)
}

// exporter puts the exporter's flags on the binary itself: it has no
// subcommands.
func exporter(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cfg := cli.Register(app)
	return "", func(ctx context.Context) error {
		return cli.Run(ctx, cfg, command.LoggerFrom(ctx), buildinfo.Version(), cli.Hooks{})
	}
}

func run(args []string, stderr io.Writer) int {
	return newApp(stderr).Run(args)
}
