package analyzercmd

import (
	"context"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/present"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
)

// Analyze is `analyze`. With open nil it reads only from Prometheus and has
// no --tsdb.path.
func Analyze(open OpenStore) command.Command {
	return func(app *kingpin.Application) (string, func(ctx context.Context) error) {
		return analyze(app, open)
	}
}

func analyze(app *kingpin.Application, open OpenStore) (string, func(ctx context.Context) error) {
	cmd := app.Command("analyze", "Classify GPU waste per job over a time window (one shot) and print the findings.")
	var format, cfgPath string
	tf := RegisterTelemetryFlags(cmd, open)
	cmd.Flag("format", "Output: table (aligned, for people) or json ({\"findings\": [...]}).").Default("table").EnumVar(&format, "table", "json")
	cmd.Flag("analyzer.config", "Detection thresholds (YAML); built-in defaults when empty.").StringVar(&cfgPath)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(&cfgPath)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := command.LoggerFrom(ctx)
		now := time.Now()
		f, t, err := tf.Window(now)
		if err != nil {
			return err
		}
		cfg := config.Default()
		if cfgPath != "" {
			if cfg, err = config.Load(cfgPath); err != nil {
				return &clikit.UsageError{Err: err}
			}
		}
		// The step in progress is judged by no one yet: the window ends
		// where the daemon's latest cycle would.
		t = accounting.Complete(t, now, cfg.Step.D())
		q, closeQ, err := tf.Open(logger)
		if err != nil {
			return err
		}
		defer closeQ()
		e, err := engine.New(engine.Options{Querier: q, Config: cfg, Logger: logger})
		if err != nil {
			return err
		}
		a, err := e.AnalyzeWindow(ctx, f, t)
		if err != nil {
			return err
		}
		if format == "json" {
			return present.JSON(os.Stdout, a.Findings, &a.Coverage, a.Book)
		}
		return present.Table(os.Stdout, a.Findings, &a.Coverage, a.Book)
	}
}
