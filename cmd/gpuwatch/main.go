// Command gpuwatch finds and reclaims wasted GPU time: it exports GPU
// telemetry for Prometheus, analyzes it per job, acts under a policy and
// reports to teams. It holds every subcommand, including the single-node
// agent and the demo that need the embedded telemetry store; each of its own
// subcommands lives in a file here, those it shares with gpuwatch-analyzer
// in internal/command.
package main

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/embedded"
	"github.com/gpuwatch/gpuwatch/cmd/internal/analyzercmd"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

// version is the running build's version, for the subcommands of this file.
var version = buildinfo.Version()

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// newApp builds the command line: every subcommand with its flags.
func newApp(stderr io.Writer) *command.App {
	return command.New("gpuwatch", "Find and reclaim wasted GPU time: export GPU telemetry, classify waste per job, act under a policy, report to teams.", stderr,
		exporterCommand,
		dashboardsCommand,
		analyzercmd.Report,
		analyzercmd.Analyzer,
		analyzercmd.CheckConfig(checkScenario),
		analyzercmd.Audit,
		analyzercmd.Analyze(openEmbedded),
		jobCommand,
		planCommand,
		agentCommand,
		demoCommand,
	)
}

func run(args []string, stderr io.Writer) int {
	return newApp(stderr).Run(args)
}

// openEmbedded gives `--tsdb.path` (analyze, job, plan) the embedded store.
func openEmbedded(dir string, timeout time.Duration, logger *slog.Logger) (query.Querier, io.Closer, error) {
	db, err := embedded.Open(dir, embedded.Options{Timeout: timeout, Logger: logger})
	if err != nil {
		return nil, nil, err
	}
	return db, db, nil
}

// loggerFrom is the logger the log flags configured.
var loggerFrom = command.LoggerFrom

// checkScenario is check-config's validation of a simulator scenario file:
// only this binary, which runs the demo, links the simulator.
func checkScenario(path string) error {
	_, err := sim.LoadScenario(path)
	return err
}
