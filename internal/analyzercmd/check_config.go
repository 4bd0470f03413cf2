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
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func CheckConfig(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("check-config", "Validate a reclamation policy and analyzer thresholds; errors name the key and line (exit 2). For a policy, print the effective policy (each tier, its match, each rule's steps with the effective dry-run and reclaim) and warn about risky choices, such as a catch-all tier that reclaims.")
	var polFile, cfgFile string
	pol, cfg := &polFile, &cfgFile
	cmd.Flag("policy.file", "Reclamation policy file (YAML) to check.").StringVar(pol)
	command.OldSpelling(cmd, "policy", "policy.file").StringVar(pol)
	cmd.Flag("analyzer.config", "Analyzer thresholds file (YAML) to check.").StringVar(cfg)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(cfg)
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *pol == "" && *cfg == "" {
			return &cli.UsageError{Err: errors.New("nothing to check: give --policy.file and/or --analyzer.config")}
		}
		var errs []error
		if *pol != "" {
			p, err := policy.LoadFile(*pol)
			if err != nil {
				errs = append(errs, err)
			} else {
				fmt.Fprintf(os.Stdout, "%s: OK (%d tiers, %d exemptions, dry_run=%v)\n", *pol, len(p.Tiers), len(p.Exemptions), p.DryRun)
				if err := p.WriteEffective(os.Stdout); err != nil {
					return err
				}
				for _, w := range p.Warnings() {
					fmt.Fprintf(os.Stderr, "warning: %s\n", w)
				}
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
