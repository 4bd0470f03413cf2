// Command gpuwatch-analyzer is the fleet daemon and its tools: the analyzer
// daemon, analyze, report, audit and check-config, the same subcommands as
// in gpuwatch. It reads telemetry only from a Prometheus-compatible API, so
// it leaves out the embedded telemetry store (Prometheus' TSDB and the cloud
// SDKs it pulls in), the exporter, the agent and the demo.
package main

import (
	"io"
	"os"

	"github.com/gpuwatch/gpuwatch/cmd/internal/analyzercmd"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func newApp(stderr io.Writer) *command.App {
	return command.New("gpuwatch-analyzer", "Classify GPU waste per job from Prometheus, act on it under a policy (dry-run by default, audited) and report to teams.", stderr,
		analyzercmd.Analyzer,
		analyzercmd.Analyze(nil),
		analyzercmd.Report,
		analyzercmd.Audit,
		analyzercmd.CheckConfig(nil),
	)
}

func run(args []string, stderr io.Writer) int {
	return newApp(stderr).Run(args)
}
