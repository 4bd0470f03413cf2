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
		c := configCheck{report: *rep, teams: *tm, web: *webCfg, scenario: *scenario, policy: *pol, thresholds: *cfg, checkScenario: checkScenario}
		return c.run()
	}
}

// configCheck is one check-config run: the files given (empty: not
// checked), each checked whatever the others' errors, so that every
// error is reported at once.
type configCheck struct {
	report, teams, web, scenario, policy, thresholds string
	checkScenario                                    func(path string) error
	errs                                             []error
}

func (c *configCheck) run() error {
	var teamsCfg *teams.Config
	if c.report != "" {
		_, err := report.LoadConfig(c.report)
		c.note(c.report, err)
	}
	if c.teams != "" {
		teamsCfg = c.checkTeams()
	}
	if c.web != "" {
		c.checkWeb()
	}
	if c.scenario != "" {
		c.note(c.scenario, c.checkScenario(c.scenario))
	}
	if c.policy != "" {
		if err := c.checkPolicy(teamsCfg); err != nil {
			return err
		}
	}
	if c.thresholds != "" {
		_, err := config.Load(c.thresholds)
		c.note(c.thresholds, err)
	}
	if len(c.errs) > 0 {
		return &clikit.UsageError{Err: errors.Join(c.errs...)}
	}
	return nil
}

// note keeps err, or says path is OK.
func (c *configCheck) note(path string, err error) bool {
	if err != nil {
		c.errs = append(c.errs, err)
		return false
	}
	fmt.Fprintf(os.Stdout, "%s: OK\n", path)
	return true
}

func (c *configCheck) checkTeams() *teams.Config {
	t, err := teams.Load(c.teams)
	if !c.note(c.teams, err) {
		return nil
	}
	for _, w := range t.Warnings {
		fmt.Fprintf(os.Stderr, "warning: %s\n", w)
	}
	return t
}

func (c *configCheck) checkWeb() {
	if err := clikit.ValidateWebConfig(&web.FlagConfig{WebConfigFile: &c.web}); err != nil {
		c.errs = append(c.errs, err)
		return
	}
	auth, err := clikit.WebConfigAuth(c.web)
	if c.note(c.web, err) && !auth {
		fmt.Fprintf(os.Stderr, "warning: %s enables no authentication (no basic_auth_users, no required client certificate): anyone who reaches the listener reads the findings and the audit log; listen on 127.0.0.1 only, or add basic_auth_users\n", c.web)
	}
}

// checkPolicy prints the effective policy and its warnings (with the
// teams file's, those about a team taken from a pod label).
func (c *configCheck) checkPolicy(teamsCfg *teams.Config) error {
	p, err := policy.LoadFile(c.policy)
	if err != nil {
		c.errs = append(c.errs, err)
		return nil
	}
	fmt.Fprintf(os.Stdout, "%s: OK (%d tiers, %d exemptions, dry_run=%v)\n", c.policy, len(p.Tiers), len(p.Exemptions), p.DryRun)
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
	return nil
}
