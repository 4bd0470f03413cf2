package analyzercmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/action/nvmlcheck"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/mail"
	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/query/promapi"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	analyzerweb "github.com/gpuwatch/gpuwatch/analyzer/web"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/rungroup"
	"github.com/gpuwatch/gpuwatch/schema"
)

// analyzerOptions are the `gpuwatch analyzer` flags.
type analyzerOptions struct {
	PolicyFile string
	Storage    *storageFlags
	Schedule   string
	Once       bool
	// Findings come from the engine over a Prometheus-compatible API, or
	// are replayed from a JSON file (re-read every cycle).
	PrometheusURL  string
	AnalyzerConfig string
	// QueryLimits cap what Prometheus' answers may hold.
	QueryLimits  query.Limits
	FindingsFile string
	// Slurm commands.
	Scancel, Squeue, Sacct, Scontrol, Sinfo string
	CommandTimeout                          time.Duration
	// SlurmCluster names the local Slurm cluster for the target proof.
	SlurmCluster string
	// Kubernetes: a kubeconfig file, or the in-cluster service account.
	Kubeconfig string
	InCluster  bool
	// LeaseDuration is how long this analyzer's claim on the store lasts
	// without renewal: another analyzer on the same store stands by until
	// the claim expires.
	LeaseDuration time.Duration
	// LeaseNamespace, with a Kubernetes client, runs leader election on a
	// Lease in this namespace, so that Deployment replicas never both act.
	LeaseNamespace string
	// JupyterHubURL and JupyterHubTokenFile: idle notebooks of JupyterHub
	// pods are stopped through the Hub API instead of evicted.
	JupyterHubURL, JupyterHubTokenFile string
	// TeamsFile is the teams file (as the exporter's) that gives the team
	// and kind of an allocation from its owner's facts; without it, tiers
	// and exemptions by team cannot be decided.
	TeamsFile string
	// ProcessLocal kills orphaned processes on this host (Hostname).
	ProcessLocal bool
	Hostname     string
	// Pools say where the capacity planner's node pools come from.
	Pools *PoolFlags
	// ReportConfig adds the weekly report (and daily digest) jobs; its
	// smtp section also sends the email channel's warnings.
	ReportConfig string
	Web          *web.FlagConfig
}

// runAnalyzer runs `gpuwatch analyzer`. Problems with flags or files are
// *clikit.UsageError (exit 2).
func runAnalyzer(ctx context.Context, o analyzerOptions, logger *slog.Logger, version string) error {
	in, err := o.inputs(logger)
	if err != nil {
		return err
	}
	// A daemon binds first: a port in use fails the start before anything
	// is logged. A single cycle (--once) serves nothing.
	ls := &clikit.Listeners{}
	if !o.Once {
		if ls, err = clikit.Listen(o.Web); err != nil {
			return err
		}
		defer ls.Close()
	}
	target, err := o.Storage.target(logger, false)
	if err != nil {
		return err
	}
	st, err := store.OpenURL(target)
	if err != nil {
		return err
	}
	defer st.Close()
	r := &analyzerRun{o: &o, in: in, st: st, logger: logger, reg: prometheus.NewRegistry()}
	if err := r.wire(ctx); err != nil {
		return err
	}
	defer func() { _ = r.lease.Release(context.WithoutCancel(ctx)) }()
	if o.Once {
		return runOnce(ctx, r.d, st, r.lease.TTL, logger)
	}
	return r.serve(ctx, ls, version)
}

// analyzerRun is the analyzer's parts once wired: the store and its audit
// log, the source of findings, the daemon with its escalator, and the
// registry its metrics go to.
type analyzerRun struct {
	o      *analyzerOptions
	in     analyzerInputs
	st     *store.Store
	lg     *audit.Log
	src    daemon.Source
	kc     *kube.Client
	esc    *daemon.Escalator
	d      *daemon.Daemon
	lease  *leader.StoreLease
	logger *slog.Logger
	reg    *prometheus.Registry
	acts   int
}

// wire builds the daemon: the findings' source, the actuators, the facts
// each step's target is proven by, and the store lease that fences it.
func (r *analyzerRun) wire(ctx context.Context) error {
	o, logger := r.o, r.logger
	var err error
	if r.lg, err = audit.Open(ctx, r.st); err != nil {
		return err
	}
	if r.src, err = o.source(r.st, logger); err != nil {
		return err
	}
	if r.kc, err = KubeClient(o.Kubeconfig, o.InCluster); err != nil {
		return err
	}
	slurmErr := o.slurmReachable(ctx, logger)
	acts := o.actuators(r.in.policy, r.in.sender, r.kc, slurmErr == nil, logger)
	r.acts = len(acts)
	resolver := o.resolver(r.src, r.in.teams, r.kc, slurmErr, logger)
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())
	r.esc = &daemon.Escalator{Policy: r.in.policy, Log: r.lg, Actuators: acts, Logger: logger, Metrics: daemon.NewMetrics(r.reg), Facts: resolver,
		SlurmCluster: o.SlurmCluster}
	if es, ok := r.src.(daemon.EngineSource); ok {
		es.Metrics = r.esc.Metrics.Found
		r.src = es
	}
	ttl := cmp.Or(max(o.LeaseDuration, 0), daemon.DefaultLeaseDuration)
	r.lease = &leader.StoreLease{Store: r.st, Identity: leader.Identity(), TTL: ttl}
	r.d = &daemon.Daemon{Source: r.src, Escalator: r.esc, Spec: o.Schedule, Logger: logger, Leader: r.lease, RenewEvery: ttl / 3,
		Drainer: drainer(r.in.policy, r.lg, r.st, acts, r.esc.Metrics, logger)}
	return nil
}

// serve runs the daemon, its report jobs and planner, and the page, until
// ctx ends.
func (r *analyzerRun) serve(ctx context.Context, ls *clikit.Listeners, version string) error {
	o, logger, d := r.o, r.logger, r.d
	planner, planSrc, err := o.planner(r.st, r.src, r.kc, logger)
	if err != nil {
		return err
	}
	if planner != nil {
		r.reg.MustRegister(planner.Metrics)
	}
	if r.in.report != nil {
		if r.in.sender == nil {
			return &clikit.UsageError{Err: errors.New("--report.config: the smtp section is needed to send reports")}
		}
		// The report jobs send only while the daemon leads, checked right
		// before each send (the daemon's fence, whatever leadership it ends with).
		deps := report.Deps{Store: r.st, Config: r.in.report, Sender: r.in.sender, Logger: logger, Planner: planSrc, Guard: d.Guard()}
		jobs, err := reportJobs(ctx, deps, r.lg)
		if err != nil {
			return err
		}
		d.Jobs = append(d.Jobs, jobs...)
	}
	page, err := webPage(r.st, r.lg, r.in.report, planner, planSrc, r.esc, logger, version)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{Registry: r.reg}))
	mux.Handle("/healthz", d.HealthHandler())
	mux.Handle("/", analyzerweb.Handler(page))
	// Every goroutine below is joined before the command returns: the
	// lease is released, the listeners shut down and the cycle in flight
	// finished before the process exits.
	g := rungroup.New(ctx)
	if r.kc != nil && o.LeaseNamespace != "" {
		kl, err := kube.NewLease(kube.LeaseOptions{Coordination: r.kc.Coordination, Namespace: o.LeaseNamespace, Identity: r.lease.Identity, ReleaseOnCancel: true})
		if err != nil {
			return err
		}
		g.Loop(kl.Run)
		d.Leader = leader.Both{kl, r.lease}
	}
	g.Go(func(ctx context.Context) error { return ls.Serve(ctx, mux, logger) })
	g.Go(d.Run)
	if planner != nil {
		g.Loop(planner.Run)
	}
	if open, err := clikit.OpenWithoutAuth(o.Web, ls.Addrs()); err != nil {
		return err
	} else if len(open) > 0 {
		logger.Warn(clikit.OpenListenerWarning, "listen", open)
	}
	logger.Info("analyzer started", "listen", ls.Addrs(), "schedule", o.Schedule, "dry_run", r.in.policy.DryRun, "actuators", r.acts, "jobs", len(d.Jobs))
	return g.Run()
}

// analyzerInputs are the files the analyzer reads before it opens
// anything: each bad one is a usage error naming its flag.
type analyzerInputs struct {
	policy *policy.Policy
	report *report.Config
	sender mail.Sender
	teams  *teams.Config
}

func (o *analyzerOptions) inputs(logger *slog.Logger) (analyzerInputs, error) {
	var in analyzerInputs
	var err error
	if in.policy, err = policy.LoadFile(o.PolicyFile); err != nil {
		return in, &clikit.UsageError{Err: fmt.Errorf("--policy.file: %w", err)}
	}
	if err := daemon.ValidateSpec(o.Schedule); err != nil {
		return in, &clikit.UsageError{Err: fmt.Errorf("--schedule: %w", err)}
	}
	if err := clikit.ValidateWebConfig(o.Web); err != nil {
		return in, err
	}
	if o.ReportConfig != "" {
		if in.report, err = report.LoadConfig(o.ReportConfig); err != nil {
			return in, &clikit.UsageError{Err: fmt.Errorf("--report.config: %w", err)}
		}
		if in.report.SMTP.Host != "" {
			if in.sender, err = mail.NewSMTP(in.report.SMTP, logger); err != nil {
				return in, &clikit.UsageError{Err: fmt.Errorf("--report.config smtp: %w", err)}
			}
		}
	}
	if o.TeamsFile != "" {
		if in.teams, err = teams.Load(o.TeamsFile); err != nil {
			return in, &clikit.UsageError{Err: fmt.Errorf("--teams.file: %w", err)}
		}
	}
	return in, nil
}

// resolver gives the escalator each scheduler's facts: Slurm's from
// squeue when Slurm answers (else why it cannot be asked), the API
// server's owners and nodes, a JupyterHub's record of its pods. The
// engine judges overlong by the jobs' own limits and kinds by owners
// from the same sources.
func (o *analyzerOptions) resolver(src daemon.Source, tm *teams.Config, kc *kube.Client, slurmErr error, logger *slog.Logger) *facts.Resolver {
	resolver := &facts.Resolver{Sources: map[string]facts.Source{}, Teams: tm}
	es, isEngine := src.(daemon.EngineSource)
	if _, err := exec.LookPath(cmp.Or(o.Squeue, "squeue")); err == nil && slurmErr == nil {
		slurm := &facts.SlurmSource{Runner: execrun.Exec{Timeout: o.CommandTimeout}, Squeue: o.Squeue}
		resolver.Sources[schema.SchedulerSlurm] = slurm
		if isEngine {
			es.Engine.UseLimits(slurm) // overlong judges by each job's own time limit
		}
	} else if slurmErr != nil {
		// Decisions still name the fact that is missing, and why.
		resolver.Sources[schema.SchedulerSlurm] = &facts.Unreachable{Name: schema.SchedulerSlurm, Err: slurmErr}
	} else {
		logger.Info("no Slurm facts: squeue not found; Slurm findings match no tier that needs one", "squeue", cmp.Or(o.Squeue, "squeue"))
	}
	if kc != nil {
		var kf facts.Source = &kube.Facts{Core: kc.Core, Apps: kc.Apps, Batch: kc.Batch}
		if o.JupyterHubURL != "" {
			// Pods no controller owns are notebooks when the Hub records them.
			kf = &facts.HubKinds{Source: kf, Hub: &action.JupyterHub{URL: o.JupyterHubURL, TokenFile: o.JupyterHubTokenFile}}
		}
		resolver.Sources[schema.SchedulerKubernetes] = kf
		if isEngine {
			es.Engine.UseOwners(kf) // kinds from the pods' owners, not their names
		}
	}
	return resolver
}

// runOnce is --once: one cycle, or standing by while another analyzer
// leads on the store.
func runOnce(ctx context.Context, d *daemon.Daemon, st *store.Store, ttl time.Duration, logger *slog.Logger) error {
	res, err := d.RunOnceOrStandBy(ctx, st, leader.LeaseName, ttl)
	switch {
	case err != nil:
		return err
	case ctx.Err() != nil:
		return nil
	case res.Standby:
		holder, until, _ := st.LeaseHolder(ctx, leader.LeaseName)
		logger.Warn("another analyzer leads on this store: nothing done", "holder", holder, "until", until)
	case res.Waiting:
		logger.Info("no analysis step completed since the last cycle: nothing judged")
	default:
		logger.Info("escalation cycle", "findings", res.Findings, "unknown", res.Unknown, "exempt", res.Exempt,
			"steps", res.Steps, "rate_limited", res.RateLimited)
	}
	return nil
}

// planner is the capacity planner on the same Prometheus: a plan of the
// trailing week, refreshed hourly, for the Planner tab and
// gpuwatch_planner_*, and a plan of each report's period for the reports.
// Without --prometheus.url there is none.
func (o *analyzerOptions) planner(st *store.Store, src daemon.Source, kc *kube.Client, logger *slog.Logger) (*plan.Refresher, report.Planner, error) {
	if o.PrometheusURL == "" {
		return nil, nil, nil
	}
	pq, err := promapi.New(o.PrometheusURL, promapi.Options{Logger: logger, Limits: o.QueryLimits})
	if err != nil {
		return nil, nil, &clikit.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
	}
	books := accounting.Books{Records: st}
	if es, ok := src.(daemon.EngineSource); ok {
		books.Step = es.Engine.Step() // the planner's team hours on the daemon's step grid
	}
	po := plan.Options{Books: books}
	if o.Pools != nil {
		if err := o.Pools.Apply(&po, kc, &slurm.Client{Runner: execrun.Exec{Timeout: o.CommandTimeout}, Sinfo: o.Sinfo}); err != nil {
			return nil, nil, err
		}
	}
	r := &plan.Refresher{Querier: pq, Options: po, Metrics: plan.NewMetrics(), Logger: logger, Ready: prometheusReady(pq)}
	return r, &plan.Source{Querier: pq, Options: po}, nil
}

// reportJobs are the weekly report, the daily digest where configured,
// and the end-of-job mail where enabled.
func reportJobs(ctx context.Context, deps report.Deps, lg *audit.Log) ([]daemon.Job, error) {
	wj, err := report.WeeklyJob(ctx, deps)
	if err != nil {
		return nil, &clikit.UsageError{Err: fmt.Errorf("--report.config: %w", err)}
	}
	jobs := []daemon.Job{daemon.Job(wj)}
	if dj, ok, err := report.DailyDigestJob(ctx, deps); err != nil {
		return nil, &clikit.UsageError{Err: fmt.Errorf("--report.config: %w", err)}
	} else if ok {
		jobs = append(jobs, daemon.Job(dj))
	}
	if deps.Config.JobMail.Enabled {
		jm, err := report.JobMailJob(ctx, deps, lg)
		if err != nil {
			return nil, &clikit.UsageError{Err: fmt.Errorf("--report.config: %w", err)}
		}
		jobs = append(jobs, daemon.Job(jm))
	}
	return jobs, nil
}

// webPage is the analyzer's page: findings, audit, and with a report
// configuration the reports and accounting tabs, with a planner its tab.
func webPage(st *store.Store, lg *audit.Log, rcfg *report.Config, planner *plan.Refresher, planSrc report.Planner,
	esc *daemon.Escalator, logger *slog.Logger, version string) (analyzerweb.Options, error) {
	page := analyzerweb.Options{Findings: analyzerweb.StoreFindings{Store: st}, Audit: analyzerweb.AuditLog{Log: lg}, Logger: logger,
		Title: "gpuwatch analyzer " + version, Coverage: esc.Metrics.Found}
	if rcfg != nil {
		rd, err := report.NewRenderer()
		if err != nil {
			return page, err
		}
		rb := report.NewBuilder(st, rcfg)
		rb.Planner = planSrc
		page.Reports = analyzerweb.BuiltReports{Builder: rb, Renderer: rd}
		page.Accounting = analyzerweb.BuiltReports{Builder: rb, Renderer: rd}
	}
	if planner != nil {
		page.Planner = planner
	}
	return page, nil
}

func (o *analyzerOptions) source(st *store.Store, logger *slog.Logger) (daemon.Source, error) {
	switch {
	case o.FindingsFile != "" && o.PrometheusURL != "":
		return nil, &clikit.UsageError{Err: errors.New("--findings.file and --prometheus.url exclude each other")}
	case o.FindingsFile != "":
		if _, err := os.Stat(o.FindingsFile); err != nil {
			return nil, &clikit.UsageError{Err: fmt.Errorf("--findings.file: %w", err)}
		}
		return daemon.FileSource{Path: o.FindingsFile, Store: st}, nil
	case o.PrometheusURL != "":
		cfg := config.Default()
		if o.AnalyzerConfig != "" {
			var err error
			if cfg, err = config.Load(o.AnalyzerConfig); err != nil {
				return nil, &clikit.UsageError{Err: fmt.Errorf("--analyzer.config: %w", err)}
			}
		}
		q, err := promapi.New(o.PrometheusURL, promapi.Options{Logger: logger, Limits: o.QueryLimits})
		if err != nil {
			return nil, &clikit.UsageError{Err: fmt.Errorf("--prometheus.url: %w", err)}
		}
		e, err := engine.New(engine.Options{Querier: q, Store: st, Config: cfg, Logger: logger})
		if err != nil {
			return nil, err
		}
		return daemon.EngineSource{Engine: e, Ready: prometheusReady(q), Series: q, Where: redactedURL(o.PrometheusURL)}, nil
	}
	return nil, &clikit.UsageError{Err: errors.New("findings need --prometheus.url (or --findings.file to replay findings)")}
}

// prometheusReady is the daemon's check before each cycle and plan: the
// ping `analyze` makes at start, so that a Prometheus that is away is one
// line naming the flag, the URL and the cause, as in `analyze`, not a raw
// transport error per query.
func prometheusReady(c *promapi.Client) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := c.Ping(ctx); err != nil {
			return fmt.Errorf("--prometheus.url: %w", err)
		}
		return nil
	}
}

// redactedURL is u with any password replaced, for text the web page shows.
func redactedURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "--prometheus.url"
	}
	return p.Redacted()
}

// drainer takes nodes out of service through the drain and cordon
// actuators, which acts also holds under their names so that Reconcile
// settles an interrupted drain; nil when the policy leaves it off.
func drainer(pol *policy.Policy, lg *audit.Log, st *store.Store, acts map[string]action.Actuator, m *daemon.Metrics, logger *slog.Logger) *daemon.Drainer {
	if !pol.OutOfService.Enabled {
		return nil
	}
	by := map[string]action.Actuator{}
	for sched, name := range map[string]string{schema.SchedulerSlurm: action.SlurmDrainName, schema.SchedulerKubernetes: action.KubernetesCordonName} {
		if a := acts[name]; a != nil {
			by[sched] = a
		}
	}
	logger.Info("nodes whose GPUs keep faulting are taken out of service", "dry_run", pol.OutOfService.DryRun,
		"faults", pol.OutOfService.Faults, "window", pol.OutOfService.Window, "schedulers", len(by))
	return &daemon.Drainer{Policy: pol, Log: lg, History: st, Actuators: by, Logger: logger, Metrics: m}
}

// slurmReachable returns why squeue, installed, cannot reach a Slurm
// controller (no slurm.conf, no DNS SRV record, a controller that is down):
// the analyzer then says so in one line at start and neither asks Slurm for
// facts nor acts through it, instead of logging squeue's fatal error every
// cycle; decisions name that reason as the missing facts' cause. Without
// squeue it is nil, and the lookups below say what is missing.
func (o *analyzerOptions) slurmReachable(ctx context.Context, logger *slog.Logger) error {
	squeue := cmp.Or(o.Squeue, "squeue")
	path, err := exec.LookPath(squeue)
	if err != nil {
		return nil
	}
	c := &slurm.Client{Runner: execrun.Exec{Timeout: o.CommandTimeout}, Squeue: path}
	if err := c.Reachable(ctx); err != nil {
		logger.Warn("Slurm is installed but not reachable: no Slurm facts or actions until the analyzer restarts with a working slurm.conf (SLURM_CONF)",
			"squeue", path, "err", err)
		return fmt.Errorf("slurm not reachable at start: %w", err)
	}
	return nil
}

func (o *analyzerOptions) actuators(pol *policy.Policy, sender mail.Sender, kc *kube.Client, slurmOK bool, logger *slog.Logger) map[string]action.Actuator {
	acts := map[string]action.Actuator{}
	if _, err := exec.LookPath(cmp.Or(o.Scancel, "scancel")); err == nil && slurmOK {
		acts[schema.SchedulerSlurm] = &action.Slurm{Runner: execrun.Exec{Timeout: o.CommandTimeout},
			Scancel: o.Scancel, Squeue: o.Squeue, Sacct: o.Sacct, Cluster: o.SlurmCluster}
	} else if slurmOK {
		logger.Info("no Slurm actuator: scancel not found", "scancel", cmp.Or(o.Scancel, "scancel"))
	}
	if pol.OutOfService.Enabled {
		if _, err := exec.LookPath(cmp.Or(o.Scontrol, "scontrol")); err == nil && slurmOK {
			acts[action.SlurmDrainName] = &action.SlurmDrain{Runner: execrun.Exec{Timeout: o.CommandTimeout}, Scontrol: o.Scontrol, Sinfo: o.Sinfo}
		}
		if kc != nil {
			acts[action.KubernetesCordonName] = &kube.Cordon{Core: kc.Core}
		}
	}
	if kc != nil {
		acts[schema.SchedulerKubernetes] = &kube.Reclaim{Core: kc.Core, Apps: kc.Apps, Mode: pol.Kubernetes.Reclaim, DeleteAfterRefusals: pol.Kubernetes.DeleteAfterRefusals}
		if o.JupyterHubURL != "" {
			acts[schema.SchedulerKubernetes] = &action.JupyterHub{URL: o.JupyterHubURL, TokenFile: o.JupyterHubTokenFile, Pods: &kube.Pods{Core: kc.Core},
				Next: acts[schema.SchedulerKubernetes], FallbackEvict: pol.Kubernetes.JupyterHubFallback == policy.HubFallbackEvict}
		}
	}
	if o.ProcessLocal {
		host := o.Hostname
		if host == "" {
			host, _ = os.Hostname()
		}
		pa := &action.Processes{Hostname: host, Grace: pol.ProcessGrace}
		// The kill is confirmed through this node's NVML; without it the
		// actuator refuses every kill (and says so in the audit).
		if n, err := nvmlcheck.Open(); err != nil {
			logger.Warn("orphaned processes will not be killed: NVML unavailable", "err", err)
		} else {
			pa.GPUs = n
		}
		if s, ok := acts[schema.SchedulerSlurm].(*action.Slurm); ok {
			pa.JobActive = s.Active
		}
		acts["process"] = pa
	}

	if pol.Channels.WebhookURL != "" {
		acts[policy.ChannelWebhook] = &action.Webhook{URL: pol.Channels.WebhookURL, Format: pol.Channels.WebhookFormat}
	}
	if pol.Channels.AlertmanagerURL != "" {
		acts[policy.ChannelAlertmanager] = &action.Alertmanager{URL: pol.Channels.AlertmanagerURL, Duration: pol.Channels.AlertDuration}
	}
	if pol.Channels.Configured(policy.ChannelEmail) {
		if sender == nil {
			logger.Warn("the policy configures email but no SMTP server is set (--report.config smtp section): email warnings are skipped")
		} else {
			acts[policy.ChannelEmail] = &action.Email{Mailer: sender, Domain: pol.Channels.EmailDomain, To: pol.Channels.EmailTo}
		}
	}
	return acts
}
