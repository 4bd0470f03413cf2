package analyzercmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

func CheckConfig(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("check-config", "Validate a reclamation policy and analyzer thresholds; errors name the key and line (exit 2).")
	pol := cmd.Flag("policy", "Reclamation policy file (YAML) to check.").String()
	cfg := cmd.Flag("config", "Analyzer thresholds file (YAML) to check.").String()
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *pol == "" && *cfg == "" {
			return &cli.UsageError{Err: errors.New("nothing to check: give --policy and/or --config")}
		}
		var errs []error
		if *pol != "" {
			p, err := policy.LoadFile(*pol)
			if err != nil {
				errs = append(errs, err)
			} else {
				fmt.Fprintf(os.Stdout, "%s: OK (%d tiers, %d exemptions, dry_run=%v)\n", *pol, len(p.Tiers), len(p.Exemptions), p.DryRun)
			}
		}
		if *cfg != "" {
			if _, err := config.Load(*cfg); err != nil {
				errs = append(errs, err)
			} else {
				fmt.Fprintf(os.Stdout, "%s: OK\n", *cfg)
			}
		}
		if len(errs) > 0 {
			return &cli.UsageError{Err: errors.Join(errs...)}
		}
		return nil
	}
}
