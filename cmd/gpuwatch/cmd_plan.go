package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/hourly"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/cmd/internal/analyzercmd"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
)

func planCommand(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("plan", "Plan GPU capacity over a window: per-allocation demand (compute and memory p50/p95/peak), "+
		"the MIG slice or smaller GPU that would do, the fewest GPUs per node pool (MIG layouts the hardware accepts, or "+
		"time-slicing for work whose peaks do not coincide), idle capacity by hour of week, a week-ahead forecast "+
		"(needs a window of at least two weeks) and the per-team pooling view. Allocations whose demand is unknown "+
		"keep their GPUs: they are never counted as freeable.")
	tf := analyzercmd.RegisterTelemetryFlags(cmd, openEmbedded)
	var format, tz string
	var o plan.Options
	cmd.Flag("format", "Output: table (for people) or json (the whole plan).").Default("table").EnumVar(&format, "table", "json")
	pf := analyzercmd.RegisterPoolFlags(cmd)
	var kubeconfig string
	var inCluster bool
	cmd.Flag("kubernetes.kubeconfig", "Kubeconfig for reading Node labels (--pool.kubernetes-nodes).").StringVar(&kubeconfig)
	cmd.Flag("kubernetes.in-cluster", "Use the pod's service account for reading Node labels.").BoolVar(&inCluster)
	var sinfo string
	cmd.Flag("slurm.sinfo", "sinfo command, asked (--json) for the nodes' partitions (--pool.slurm-partitions).").Default("sinfo").StringVar(&sinfo)
	cmd.Flag("time-zone", "IANA time zone of the hour-of-week figures, batch windows and reservations.").Default("UTC").StringVar(&tz)
	cmd.Flag("plan.target-load", "Share of a shared GPU's compute and memory the summed demand may fill per hour (0-1): p95 of SM activity, or mean util where only util is published.").Default("0.9").Float64Var(&o.TargetLoad)
	cmd.Flag("plan.compute-headroom", "Factor on p95 compute when sizing a MIG slice.").Default("1.2").Float64Var(&o.ComputeHeadroom)
	cmd.Flag("plan.memory-headroom", "Factor on peak memory when sizing a slice or a share.").Default("1.1").Float64Var(&o.MemoryHeadroom)
	o.Rules = demand.RulesAuto
	cmd.Flag("plan.recording-rules", "Read the hourly figures from gpuwatch's planner recording rules (rules/gpuwatch-recording.yml, group "+hourly.Group+"): "+
		"auto (when they cover the window, else raw series, saying why), off (raw series) or only (fail when they do not cover the window).").
		Default(string(demand.RulesAuto)).SetValue(&o.Rules)
	cmd.Flag("plan.isolation-margin", "GPUs more than time-slicing a pool's MIG answer may cost and still be chosen, for its memory and fault isolation; pools of interactive sessions take MIG whenever each has a valid slice.").Default("0").IntVar(&o.IsolationMargin)
	cmd.Flag("plan.min-history", "Least history the plan is made on: hours from the first whole clock hour with GPU samples to the window's end. "+
		"Less is refused with one line saying when to ask again; the packing bets that hourly peaks do not coincide, which needs a day's cycle. "+
		"The forecast needs a week and is left out below that.").Default(strings.TrimSuffix(plan.DefaultMinHistory.String(), "0m0s")).DurationVar(&o.MinHistory)
	cmd.Flag("plan.min-samples", "Samples below which an allocation's demand is unknown (and its GPUs kept).").Default("10").Float64Var(&o.MinSamples)
	return cmd.FullCommand(), func(ctx context.Context) error {
		logger := loggerFrom(ctx)
		from, to, err := tf.Window(time.Now())
		if err != nil {
			return err
		}
		if o.TargetLoad <= 0 || o.TargetLoad > 1 {
			return &clikit.UsageError{Err: fmt.Errorf("--plan.target-load %g: want a share in (0, 1]", o.TargetLoad)}
		}
		if o.ComputeHeadroom < 1 || o.MemoryHeadroom < 1 {
			return &clikit.UsageError{Err: fmt.Errorf("--plan.compute-headroom and --plan.memory-headroom must be at least 1")}
		}
		if o.IsolationMargin < 0 {
			return &clikit.UsageError{Err: fmt.Errorf("--plan.isolation-margin %d: want at least 0", o.IsolationMargin)}
		}
		if o.MinHistory < time.Hour {
			return &clikit.UsageError{Err: fmt.Errorf("--plan.min-history %s: want at least 1h (the plan reads whole clock hours)", o.MinHistory)}
		}
		if o.MinSamples < 1 {
			return &clikit.UsageError{Err: fmt.Errorf("--plan.min-samples %g: want at least 1", o.MinSamples)}
		}
		if o.Location, err = time.LoadLocation(tz); err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--time-zone: %w", err)}
		}
		kube, err := analyzercmd.KubeClient(kubeconfig, inCluster)
		if err != nil {
			return err
		}
		if err := pf.Apply(&o, kube, &slurm.Client{Runner: execrun.Exec{Timeout: time.Minute}, Sinfo: sinfo}); err != nil {
			return err
		}
		q, closeQ, err := tf.Open(logger)
		if err != nil {
			return err
		}
		defer closeQ()
		p, err := plan.Build(ctx, q, from, to, o)
		if err != nil {
			return err
		}
		if format == "json" {
			return plan.JSON(os.Stdout, p)
		}
		return plan.Table(os.Stdout, p)
	}
}
