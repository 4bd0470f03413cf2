package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/cmd/internal/analyzercmd"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
)

func jobCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("job", "Show one job's GPU use: per-GPU utilization, SM activity, memory, power and energy with sparklines, CPU efficiency, the waste found and advice. "+
		"With --summary (from the Slurm epilog), write a compact summary into the job's AdminComment instead; `gpuwatch job` shows that summary once Prometheus no longer holds the job.")
	var (
		id, format, cfgPath, scontrol, lookback string
		squeue, sacct                           string
		timeout, summaryTimeout                 time.Duration
		summary                                 bool
	)
	cmd.Arg("job", "Slurm job id (1234, 1234_5) or Kubernetes namespace/pod.").Required().StringVar(&id)
	src := analyzercmd.RegisterSourceFlags(cmd, openEmbedded)
	cmd.Flag("format", "Output: table (for a terminal, with sparklines), json (documented in docs/job.md) or html (a standalone page).").Default("table").EnumVar(&format, "table", "json", "html")
	cmd.Flag("lookback", "How far back to look for the job's series.").Default("30d").StringVar(&lookback)
	cmd.Flag("analyzer.config", "Detection thresholds (YAML) for the findings; built-in defaults when empty.").StringVar(&cfgPath)
	command.OldSpelling(cmd, "config", "analyzer.config").StringVar(&cfgPath)
	cmd.Flag("query.timeout", "Timeout of one query.").Default("30s").DurationVar(&timeout)
	cmd.Flag("slurm.squeue", "squeue program, asked (--json) for the job's owner, state, CPUs and AdminComment (Slurm job ids only); empty to not ask Slurm.").Default("squeue").StringVar(&squeue)
	cmd.Flag("slurm.sacct", "sacct program, asked (--json) for jobs the controller no longer keeps, and for the summary accounting holds.").Default("sacct").StringVar(&sacct)
	cmd.Flag("slurm.scontrol", "scontrol program, used only to write the summary into a running job's AdminComment (never parsed).").Default("scontrol").StringVar(&scontrol)
	cmd.Flag("summary", "Write the job's summary into its Slurm AdminComment (scontrol update while the job runs, else sacctmgr into accounting) instead of printing the view; for the epilog companion deploy/slurm/job-summary.").BoolVar(&summary)
	cmd.Flag("summary.timeout", "Time allowed to read the figures for --summary; past it (or with Prometheus down) a short note saying so is written instead, so the epilog is never held up.").Default("10s").DurationVar(&summaryTimeout)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := loggerFrom(ctx)
		ref, err := jobview.ParseRef(id)
		if err != nil {
			return &clikit.UsageError{Err: err}
		}
		back, err := model.ParseDuration(lookback)
		if err != nil || back <= 0 {
			return &clikit.UsageError{Err: fmt.Errorf("--lookback %q: want a duration such as 30d or 12h", lookback)}
		}
		cfg := config.Default()
		if cfgPath != "" {
			if cfg, err = config.Load(cfgPath); err != nil {
				return &clikit.UsageError{Err: err}
			}
		}
		if summary && (ref.Slurm == "" || squeue == "") {
			return &clikit.UsageError{Err: errors.New("--summary needs a Slurm job id and --slurm.squeue")}
		}
		q, closeQ, err := src.OpenUnchecked(logger, timeout)
		if err != nil {
			return err
		}
		defer closeQ()
		var slurm *jobview.Slurm
		if ref.Slurm != "" && squeue != "" {
			if _, err := exec.LookPath(squeue); err == nil {
				slurm = &jobview.Slurm{Runner: execrun.Exec{Timeout: 5 * time.Second}, Squeue: squeue, Sacct: sacct, Scontrol: scontrol}
			}
		}
		opts := jobview.Options{Querier: q, Config: cfg, Lookback: time.Duration(back)}
		if summary {
			if slurm == nil {
				return fmt.Errorf("--summary: %s not found", squeue)
			}
			// The epilog waits for this: the figures get summaryTimeout,
			// scontrol its own few seconds.
			bctx, cancel := context.WithTimeout(ctx, summaryTimeout)
			defer cancel()
			return jobview.WriteSummary(bctx, ctx, slurm, opts, ref, logger)
		}
		return showJob(ctx, slurm, opts, ref, format)
	}
}

// showJob prints the job's view in format: from Prometheus, with what
// Slurm says of it; when Prometheus forgot the job (or is away), the
// summary the epilog left in its AdminComment.
func showJob(ctx context.Context, slurm *jobview.Slurm, opts jobview.Options, ref jobview.Ref, format string) error {
	logger := loggerFrom(ctx)
	var sched *jobview.Scheduler
	if slurm != nil {
		var err error
		if sched, err = slurm.Job(ctx, ref.Slurm); err != nil {
			logger.Debug("slurm does not say", "job", ref, "err", err)
		}
	}
	opts.Scheduler = sched
	r, err := jobview.Build(ctx, opts, ref)
	if err != nil {
		if sched == nil || sched.AdminComment == "" {
			return err
		}
		dec, derr := sched.Summary()
		if derr != nil {
			return fmt.Errorf("%w; and its AdminComment: %w", err, derr)
		}
		logger.Info("showing the end-of-job summary from AdminComment", "reason", err)
		r = dec
	}
	switch format {
	case "json":
		return jobview.JSON(os.Stdout, r)
	case "html":
		return jobview.HTML(os.Stdout, r)
	}
	return jobview.Text(os.Stdout, r)
}
