package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/demo"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func demoCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("demo", "The whole product on a simulated cluster: fast-forward a simulated week through the embedded store, analyze it, escalate under the policy in dry-run, write reports, dashboards, findings and the audit log, print a summary, then serve /metrics (live exporter) and the analyzer's web page until interrupted.")
	var (
		o                                  demo.RunOptions
		scenario, policyFile, cfgAt, start string
		copies                             int
	)
	o.Web = kingpinflag.AddFlags(cmd, "127.0.0.1:9400")
	cmd.Flag("sim.scenario", "Simulator scenario file (YAML, see exporter/sim/scenarios/); the built-in default (4 nodes x 8 A100/H100 GPUs, every waste pattern) when empty.").StringVar(&scenario)
	command.OldSpelling(cmd, "scenario", "sim.scenario").StringVar(&scenario)
	cmd.Flag("fleet.copies", "Size of the simulated cluster: the scenario's fleet repeated this many times (each copy of the default is 4 nodes x 8 GPUs, with its own jobs and noise).").Default("1").IntVar(&copies)
	cmd.Flag("sim.seed", "Seed of the simulator's noise; the same seed gives the same demo.").Default("1").Int64Var(&o.Seed)
	command.OldSpelling(cmd, "seed", "sim.seed").Int64Var(&o.Seed)
	cmd.Flag("length", "Simulated time span.").Default("168h").DurationVar(&o.Length)
	cmd.Flag("step", "Sample step of the simulated telemetry.").Default("30s").DurationVar(&o.Step)
	cmd.Flag("start", "Start of the simulated span (RFC 3339); default: the scenario's origin, else Monday 00:00 UTC of last week.").StringVar(&start)
	cmd.Flag("cycle-interval", "How often the analyzer cycle runs in simulated time (a multiple of the analyzer step); default: every step.").DurationVar(&o.CycleEvery)
	cmd.Flag("out", "Output folder: reports/, dashboards/, findings.json, audit.json, gpuwatch.db, tsdb/ (previous demo files there are replaced); default: gpuwatch/demo under $XDG_STATE_HOME (~/.local/state), else a new temporary folder.").StringVar(&o.Out)
	cmd.Flag("policy.file", "Reclamation policy (YAML) to escalate under, always in dry-run; a built-in policy covering every pattern when empty.").StringVar(&policyFile)
	cmd.Flag("analyzer.config", "Detection thresholds (YAML); when empty, the built-in defaults plus the demo site's run-time limits (batch 48h, interactive 24h).").StringVar(&cfgAt)
	cmd.Flag("exit", "Exit after the summary instead of serving.").BoolVar(&o.Exit)
	cmd.Flag("verbose", "Also print collection and cycle counts, elapsed time and peak memory.").BoolVar(&o.Verbose)
	return cmd.FullCommand(), func(ctx context.Context) error {
		if o.Length <= 0 || o.Length > demo.MaxLength {
			return &clikit.UsageError{Err: fmt.Errorf("--length must be positive and at most %s, got %s", demo.MaxLength, o.Length)}
		}
		if o.Step <= 0 || o.CycleEvery < 0 || copies < 1 {
			return &clikit.UsageError{Err: fmt.Errorf("--step must be positive, --cycle-interval not negative and --fleet.copies at least 1 (got %s, %s, %d)", o.Step, o.CycleEvery, copies)}
		}
		o.Logger, o.Stdout, o.Version = loggerFrom(ctx), os.Stdout, version
		if err := demoInputs(&o, scenario, copies, start, policyFile); err != nil {
			return err
		}
		o.Config = demo.SiteConfig()
		if cfgAt != "" {
			c, err := config.Load(cfgAt)
			if err != nil {
				return &clikit.UsageError{Err: fmt.Errorf("--analyzer.config: %w", err)}
			}
			o.Config = c
		}
		if err := clikit.ValidateWebConfig(o.Web); err != nil {
			return err
		}
		if o.Out == "" {
			dir, err := demoStateDir(os.Getenv, os.MkdirTemp)
			if err != nil {
				return err
			}
			o.Out = dir
		}
		if fi, err := os.Stderr.Stat(); err == nil {
			o.Progress, o.Terminal = os.Stderr, fi.Mode()&os.ModeCharDevice != 0
		}
		return demo.Run(ctx, o)
	}
}

// demoInputs reads the scenario (repeated copies times), the start and
// the policy into o; each bad one is a usage error naming its flag.
func demoInputs(o *demo.RunOptions, scenario string, copies int, start, policyFile string) error {
	if scenario != "" {
		sc, err := sim.LoadScenario(scenario)
		if err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--sim.scenario: %w", err)}
		}
		o.Scenario = sc
	}
	if copies != 1 {
		sc := o.Scenario
		if sc == nil {
			sc = sim.DefaultScenario()
		}
		big, err := sc.Replicate(copies)
		if err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--fleet.copies: %w", err)}
		}
		o.Scenario = big
	}
	if start != "" {
		t, err := time.Parse(time.RFC3339, start)
		if err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--start: %w", err)}
		}
		o.Origin = t
	}
	if policyFile != "" {
		p, err := policy.LoadFile(policyFile)
		if err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--policy.file: %w", err)}
		}
		o.Policy = p
	}
	return nil
}

// demoStateDir is where the demo writes without --out: gpuwatch/demo under
// the XDG state directory, so repeated runs replace one folder and nothing
// lands in the working directory; a new temporary folder when there is no
// home to hold it.
func demoStateDir(getenv func(string) string, mkdirTemp func(dir, pattern string) (string, error)) (string, error) {
	state := getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		if home := getenv("HOME"); filepath.IsAbs(home) {
			state = filepath.Join(home, ".local", "state")
		}
	}
	if state != "" && filepath.IsAbs(state) {
		return filepath.Join(state, "gpuwatch", "demo"), nil
	}
	dir, err := mkdirTemp("", "gpuwatch-demo-")
	if err != nil {
		return "", fmt.Errorf("create the demo's output folder: %w", err)
	}
	return dir, nil
}
