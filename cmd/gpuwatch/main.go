// Command gpuwatch finds and reclaims wasted GPU time: it exports GPU
// telemetry for Prometheus, analyzes it per job, acts under a policy and
// reports to teams. Each subcommand lives in its own file; this one only
// wires them together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/exporter/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand: register adds its flags and returns the
// function that runs it.
type command func(app *kingpin.Application) (name string, run func(ctx context.Context) error)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// newApp builds the command line: every subcommand with its flags.
func newApp(stderr io.Writer) (*kingpin.Application, *cli.LogFlags, map[string]func(ctx context.Context) error) {
	// "@every 1h" is a schedule, not a file of arguments to read.
	kingpin.EnableFileExpansion = false
	app := kingpin.New("gpuwatch", "Find and reclaim wasted GPU time: export GPU telemetry, classify waste per job, act under a policy, report to teams.")
	app.Version(version)
	app.HelpFlag.Short('h')
	app.UsageWriter(stderr)
	app.ErrorWriter(stderr)
	logs := cli.RegisterLogFlags(app)
	runs := map[string]func(ctx context.Context) error{}
	for _, c := range []command{
		exporterCommand,
		dashboardsCommand,
		reportCommand,
		analyzerCommand,
		checkConfigCommand,
		auditCommand,
		analyzeCommand,
		jobCommand,
		planCommand,
		agentCommand,
		demoCommand,
	} {
		name, fn := c(app)
		runs[name] = fn
	}
	return app, logs, runs
}

func run(args []string, stderr io.Writer) int {
	app, logs, runs := newApp(stderr)
	// --help and --version end the program through Terminate; record it
	// instead, so that tests can call run and the exit code is ours.
	exit := -1
	app.Terminate(func(code int) {
		if exit < 0 {
			exit = code
		}
	})
	selected, err := app.Parse(args)
	if len(args) == 0 {
		return 2 // kingpin printed the usage: a command is required
	}
	if exit >= 0 {
		return exit
	}
	if err != nil {
		fmt.Fprintf(stderr, "gpuwatch: %v (see gpuwatch --help)\n", explainParseError(err, args))
		return 2
	}
	logger, err := logs.Logger()
	if err != nil {
		fmt.Fprintf(stderr, "gpuwatch: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = withLogger(ctx, logger)
	fn, ok := runs[selected]
	if !ok { // --help, --version, or `help COMMAND`
		return 0
	}
	if err := fn(ctx); err != nil {
		fmt.Fprintf(stderr, "gpuwatch %s: %v\n", selected, err)
		var ue *cli.UsageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// explainParseError names the flag whose value kingpin refused: its value
// errors ("time: invalid duration \"soon\"") do not say which flag they
// are about.
func explainParseError(err error, args []string) error {
	msg := err.Error()
	for i, a := range args {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, ok := strings.Cut(a, "=")
		if !ok && i+1 < len(args) {
			value = args[i+1]
		}
		if value != "" && (strings.Contains(msg, "'"+value+"'") || strings.Contains(msg, `"`+value+`"`)) {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return err
}
