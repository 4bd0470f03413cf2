package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

func dashboardsCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("dashboards", "Write gpuwatch's Grafana dashboards (fleet, node and GPU detail, waste, team and job) as JSON files.")
	out := cmd.Flag("out", "Directory to write the dashboard JSON files into (created if missing).").Required().String()
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *out == "" {
			return &cli.UsageError{Err: errors.New("--out must name a directory")}
		}
		paths, err := dashboards.Write(*out)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(os.Stdout, p)
		}
		return nil
	}
}
