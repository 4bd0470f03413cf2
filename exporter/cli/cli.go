// Package cli holds the exporter's flags and its run loop, shared by
// `gpuwatch exporter` and the lean `gpuwatch-exporter` binary, so the two
// can never drift apart.
package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/gpuwatch/gpuwatch/exporter/attribution"
	"github.com/gpuwatch/gpuwatch/exporter/collector"
	nvmlsource "github.com/gpuwatch/gpuwatch/exporter/nvml"
	"github.com/gpuwatch/gpuwatch/exporter/server"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/rungroup"
)

// DefaultListenAddress is dcgm-exporter's port, so scrape configs carry over.
const DefaultListenAddress = ":9400"

// Config holds the exporter's flag values.
type Config struct {
	Web             *web.FlagConfig
	CollectInterval time.Duration
	Source          string
	SimScenario     string
	SimSeed         int64
	SimNode         string
	Hostname        string
	GPM             bool // --collector.gpm
	XID             bool // --collector.xid
	// Attribution holds the flags of who holds each GPU (kubelet, job map, /proc, cgroups, teams).
	Attribution *attribution.Flags
}

// Register adds the exporter's flags to app or a subcommand.
func Register(g clikit.FlagGroup) *Config {
	c := &Config{Web: kingpinflag.AddFlags(g, DefaultListenAddress)}
	g.Flag("collect-interval", "How often to read the GPUs in the background; a scrape serves the latest reading and never waits on the driver.").
		Default("1s").DurationVar(&c.CollectInterval)
	g.Flag("source", "Telemetry source: nvml (the NVIDIA driver), sim (a simulated fleet) or auto (nvml, failing with advice when no driver is present).").
		Default("auto").EnumVar(&c.Source, "auto", "nvml", "sim")
	g.Flag("sim.scenario", "Scenario file (YAML) for --source=sim; the built-in scenario when empty. See exporter/sim/scenarios/.").
		Default("").StringVar(&c.SimScenario)
	g.Flag("collector.gpm", "Read profiling metrics (DCGM_FI_PROF_*) from NVML GPM on GPUs that support it (Hopper and newer), per GPU and per MIG instance. --no-collector.gpm turns it off.").
		Default("true").BoolVar(&c.GPM)
	g.Flag("collector.xid", "Listen for XID errors through an NVML event set (DCGM_FI_DEV_XID_ERRORS, gpuwatch_xid_errors_total). --no-collector.xid turns it off.").
		Default("true").BoolVar(&c.XID)
	g.Flag("sim.seed", "Seed of the simulated fleet; the same seed gives the same telemetry.").Default("1").Int64Var(&c.SimSeed)
	g.Flag("sim.node", "Simulate only this node of the scenario's fleet (default: the first node).").Default("").StringVar(&c.SimNode)
	g.Flag("hostname", "Value of the hostname label; defaults to $NODE_NAME, then the machine's host name.").
		Envar("NODE_NAME").Default("").StringVar(&c.Hostname)
	c.Attribution = attribution.RegisterFlags(g)
	return c
}

// Validate checks the flags and files before anything starts.
func (c *Config) Validate() error {
	if c.CollectInterval < 10*time.Millisecond {
		return &clikit.UsageError{Err: fmt.Errorf("--collect-interval must be at least 10ms, got %s", c.CollectInterval)}
	}
	if err := clikit.ValidateWebConfig(c.Web); err != nil {
		return err
	}
	if c.Source != "sim" && c.SimScenario != "" {
		return &clikit.UsageError{Err: errors.New("--sim.scenario needs --source=sim")}
	}
	if c.Attribution != nil {
		if err := c.Attribution.Validate(); err != nil {
			return &clikit.UsageError{Err: err}
		}
	}
	return nil
}

// OpenSource opens the configured telemetry source.
func (c *Config) OpenSource(logger *slog.Logger, clock source.Clock) (source.Source, error) {
	hostname := c.hostname()
	switch c.Source {
	case "sim":
		sc := sim.DefaultScenario()
		if c.SimScenario != "" {
			var err error
			if sc, err = sim.LoadScenario(c.SimScenario); err != nil {
				return nil, &clikit.UsageError{Err: fmt.Errorf("--sim.scenario: %w", err)}
			}
		}
		s, err := sim.New(sc, sim.Options{Seed: c.SimSeed, Clock: clock, Node: c.SimNode})
		if errors.Is(err, sim.ErrUnknownNode) {
			return nil, &clikit.UsageError{Err: fmt.Errorf("--sim.node: %w", err)}
		}
		return s, err
	default: // auto, nvml
		s, err := nvmlsource.Open(nvmlsource.Options{Hostname: hostname, Logger: logger, Clock: clock, DisableGPM: !c.GPM, DisableXID: !c.XID})
		if errors.Is(err, nvmlsource.ErrNoDriver) {
			return nil, &clikit.UsageError{Err: fmt.Errorf("%w: install the NVIDIA driver on this node, or run with --source=sim to use a simulated fleet", err)}
		}
		return s, err
	}
}

func (c *Config) hostname() string {
	if c.Hostname != "" {
		return c.Hostname
	}
	h, _ := os.Hostname()
	return h
}

// Hooks let a command run more than the exporter in the same process (the
// single-node agent feeds an embedded store and runs analyzer cycles) while
// the exporter's own wiring stays in one place.
type Hooks struct {
	// Attributors run after the attribution chain of the flags.
	Attributors []source.Attributor
	// OnCollect receives every collection (collector.Options.OnCollect).
	OnCollect func(snap *source.Snapshot, families []*dto.MetricFamily)
	// Collectors join the exporter's registry, so /metrics serves them too.
	Collectors []prometheus.Collector
	// Background runs in its own goroutine once collection has started,
	// until ctx ends; it must not return before (it is one of the
	// exporter's run group, and the first member to return ends the rest).
	Background func(ctx context.Context)
}

// Run starts collection and the HTTP server and blocks until ctx ends.
func Run(ctx context.Context, c *Config, logger *slog.Logger, version string, h Hooks) error {
	if err := c.Validate(); err != nil {
		return err
	}
	// Bind first: a port in use fails the start before anything is logged.
	ls, err := clikit.Listen(c.Web)
	if err != nil {
		return err
	}
	defer ls.Close()
	src, err := c.OpenSource(logger, source.SystemClock{})
	if err != nil {
		return err
	}
	defer src.Close()
	attributors := h.Attributors
	var chain *attribution.Chain
	if c.Attribution != nil {
		// The chain goes first, so later attributors see its allocations.
		if chain, err = attribution.New(c.Attribution.Options(logger, source.SystemClock{}, src, nil)); err != nil {
			return err
		}
		defer chain.Close()
		chain.Start(ctx)
		attributors = append([]source.Attributor{chain}, attributors...)
	}
	col, err := collector.New(collector.Options{
		Source: src, Attributors: attributors, Interval: c.CollectInterval,
		Hostname: c.Hostname, Logger: logger, OnCollect: h.OnCollect,
	})
	if err != nil {
		return err
	}
	if chain != nil {
		// Its health metrics join the collector's registry, which exists only now.
		if err := chain.Register(col.Registry()); err != nil {
			return err
		}
	}
	for _, m := range h.Collectors {
		if err := col.Registry().Register(m); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	// The first collection happens before we listen, so the first scrape has data.
	if _, err := col.CollectOnce(ctx); err != nil {
		logger.Warn("first collection failed", "err", err)
	}
	// Every goroutine is joined before Run returns, and so before the
	// deferred closes of the source and the chain.
	g := rungroup.New(ctx)
	g.Loop(col.Run)
	if chain != nil {
		g.Loop(chain.Run)
	}
	if h.Background != nil {
		g.Loop(h.Background)
	}
	g.Go(func(ctx context.Context) error { return ls.Serve(ctx, server.Handler(col, version), logger) })
	logger.Info("gpuwatch exporter started", "source", src.Name(), "collect_interval", c.CollectInterval, "listen", ls.Addrs())
	return g.Run()
}
