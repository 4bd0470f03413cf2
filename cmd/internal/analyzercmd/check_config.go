package analyzercmd

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

// CheckConfig registers check-config. checkScenario validates a simulator
// scenario file; nil (gpuwatch-analyzer, which has no simulator) leaves the
// --sim.scenario flag out, so the simulator is not linked for it.
func CheckConfig(checkScenario func(path string) error) func(app *kingpin.Application) (string, func(ctx context.Context) error) {
	return func(app *kingpin.Application) (string, func(ctx context.Context) error) {
		return checkConfig(app, checkScenario)
	}
}

func checkConfig(app *kingpin.Application, checkScenario func(path string) error) (string, func(ctx context.Context) error) {
	what := "reclamation policy, analyzer thresholds, report/SMTP config, teams file and web config"
	if checkScenario != nil {
		what = "reclamation policy, analyzer thresholds, report/SMTP config, teams file, web config and simulator scenario"
	}
	cmd := app.Command("check-config", "Validate every file gpuwatch reads: "+what+"; every error names file, line and key (exit 2), all of them at once. For a policy, print the effective policy (each tier, its match, each rule's steps with the effective dry-run and reclaim) and warn about risky choices, such as a catch-all tier that reclaims, or a tier or exemption that a field the workload writes (a trusted pod label or annotation, job name or kind; a team taken from a pod label) can sway, naming who can write it; warnings alone exit 0.")
	var polFile, cfgFile string
	pol, cfg := &polFile, &cfgFile
	cmd.Flag("policy.file", "Reclamation policy file (YAML) to check.").StringVar(pol)
	command.OldSpelling(cmd, "policy", "policy.file").StringVar(pol)
	cmd.Flag("analyzer.config", "Analyzer thresholds file (YAML) to check.").StringVar(cfg)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(cfg)
	rep := cmd.Flag("report.config", "Report and SMTP configuration file (YAML) to check.").String()
	tm := cmd.Flag("teams.file", "Teams file (YAML) to check; old camelCase keys are reported as deprecated.").String()
	webCfg := cmd.Flag("web.config.file", "exporter-toolkit web config (TLS, basic auth) to check.").String()
	scenario, flags := new(string), "--policy.file, --analyzer.config, --report.config, --teams.file or --web.config.file"
	if checkScenario != nil {
		scenario = cmd.Flag("sim.scenario", "Simulator scenario file (YAML) to check.").String()
		flags = "--policy.file, --analyzer.config, --report.config, --teams.file, --web.config.file or --sim.scenario"
	}
	return cmd.FullCommand(), func(ctx context.Context) error {
		if *pol == "" && *cfg == "" && *rep == "" && *tm == "" && *webCfg == "" && *scenario == "" {
			return &clikit.UsageError{Err: errors.New("nothing to check: give " + flags)}
		}
		var errs []error
		var teamsCfg *teams.Config
		ok := func(path string) { fmt.Fprintf(os.Stdout, "%s: OK\n", path) }
		if *rep != "" {
			if _, err := report.LoadConfig(*rep); err != nil {
				errs = append(errs, err)
			} else {
				ok(*rep)
			}
		}
		if *tm != "" {
			if t, err := teams.Load(*tm); err != nil {
				errs = append(errs, err)
			} else {
				ok(*tm)
				teamsCfg = t
				for _, w := range t.Warnings {
					fmt.Fprintf(os.Stderr, "warning: %s\n", w)
				}
			}
		}
		if *webCfg != "" {
			if err := clikit.ValidateWebConfig(&web.FlagConfig{WebConfigFile: webCfg}); err != nil {
				errs = append(errs, err)
			} else if auth, err := clikit.WebConfigAuth(*webCfg); err != nil {
				errs = append(errs, err)
			} else {
				ok(*webCfg)
				if !auth {
					fmt.Fprintf(os.Stderr, "warning: %s enables no authentication (no basic_auth_users, no required client certificate): anyone who reaches the listener reads the findings and the audit log; listen on 127.0.0.1 only, or add basic_auth_users\n", *webCfg)
				}
			}
		}
		if *scenario != "" {
			if err := checkScenario(*scenario); err != nil {
				errs = append(errs, err)
			} else {
				ok(*scenario)
			}
		}
		if *pol != "" {
			p, err := policy.LoadFile(*pol)
			if err != nil {
				errs = append(errs, err)
			} else {
				fmt.Fprintf(os.Stdout, "%s: OK (%d tiers, %d exemptions, dry_run=%v)\n", *pol, len(p.Tiers), len(p.Exemptions), p.DryRun)
				if err := p.WriteEffective(os.Stdout); err != nil {
					return err
				}
				warnings := p.Warnings()
				if teamsCfg != nil {
					warnings = append(warnings, p.PodLabelTeamWarnings(teamsCfg.Team.PodLabel)...)
				}
				for _, w := range warnings {
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
			return &clikit.UsageError{Err: errors.Join(errs...)}
		}
		return nil
	}
}
