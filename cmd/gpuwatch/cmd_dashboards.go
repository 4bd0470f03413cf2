package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/dashboards"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

func dashboardsCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("dashboards", "Write gpuwatch's Grafana dashboards (fleet, node and GPU detail, waste, team and job, capacity planner) as JSON files.")
	out := cmd.Flag("out", "Directory to write the dashboard JSON files into (created if missing).").Required().String()
	reportConfig := cmd.Flag("report.config", "Report configuration (YAML) whose default_price and prices (per GPU-hour, by model) become the team dashboard's price variables; one editable price when empty.").String()
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *out == "" {
			return &clikit.UsageError{Err: errors.New("--out must name a directory")}
		}
		opts := dashboards.DefaultOptions
		if *reportConfig != "" {
			c, err := report.LoadConfig(*reportConfig)
			if err != nil {
				return &clikit.UsageError{Err: err}
			}
			opts = dashboards.Options{DefaultPrice: c.DefaultPrice, Prices: c.Prices}
		}
		paths, err := dashboards.WriteWith(*out, opts)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(os.Stdout, p)
		}
		return nil
	}
}
