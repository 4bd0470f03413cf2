package analyzercmd

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/gpuwatch/gpuwatch/analyzer/daemon"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/buildinfo"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
	"github.com/gpuwatch/gpuwatch/internal/command"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/internal/secret"
)

func Analyzer(app *kingpin.Application) (string, func(ctx context.Context) error) {
	cmd := app.Command("analyzer", "Run the analyzer daemon: detection cycles and policy escalation (notify, warn, checkpoint, reclaim) on a cron schedule, with an audit log; dry-run unless the policy says otherwise.")
	o := &analyzerOptions{Web: kingpinflag.AddFlags(cmd, ":9836")}
	cmd.Flag("policy.file", "Reclamation policy (YAML); see deploy/examples/policy.yaml. Check it with `gpuwatch check-config --policy.file FILE`.").Required().StringVar(&o.PolicyFile)
	o.Storage = registerStorageFlags(cmd, "Path of the gpuwatch state database (SQLite): analyzer state, findings and the audit log.",
		" Replicas with leader election share one, so that a new leader neither repeats nor loses a step of the one before.")
	cmd.Flag("schedule", "Cron schedule of the cycles (5 fields, @every 5m, CRON_TZ=... allowed); a cycle that would overlap the previous one is skipped.").Default("@every 5m").StringVar(&o.Schedule)
	cmd.Flag("once", "Run one cycle (after reconciling any step a crash interrupted) and exit.").BoolVar(&o.Once)
	cmd.Flag("prometheus.url", "Prometheus-compatible API (Prometheus, Thanos, Mimir, VictoriaMetrics) the analyzer reads telemetry from.").StringVar(&o.PrometheusURL)
	cmd.Flag("analyzer.config", "Detection thresholds (YAML) for the analyzer engine; built-in defaults when empty.").StringVar(&o.AnalyzerConfig)
	queryLimits := RegisterQueryLimitFlags(cmd)
	cmd.Flag("findings.file", "Act on the findings in this JSON file (an array, re-read every cycle) instead of running the engine: replays and tests.").StringVar(&o.FindingsFile)
	cmd.Flag("slurm.scancel", "scancel command.").Default("scancel").StringVar(&o.Scancel)
	cmd.Flag("slurm.squeue", "squeue command: checks job states, and once per cycle (squeue --json) reads every job's partition, QoS, account, user and name for the policy.").Default("squeue").StringVar(&o.Squeue)
	cmd.Flag("slurm.sacct", "sacct command, asked (--json) for the state of jobs the controller no longer keeps; without accounting they count as gone.").Default("sacct").StringVar(&o.Sacct)
	cmd.Flag("slurm.scontrol", "scontrol command, used only to drain a node (scontrol update State=DRAIN) when the policy's out_of_service is enabled; never parsed.").Default("scontrol").StringVar(&o.Scontrol)
	cmd.Flag("slurm.sinfo", "sinfo command, asked (--json) for a node's state before and after a drain.").Default("sinfo").StringVar(&o.Sinfo)
	cmd.Flag("slurm.cluster", "Name of the local Slurm cluster (ClusterName in slurm.conf). Where the telemetry's series carry a cluster label (one Prometheus holding several clusters), a Slurm finding is acted on only when its label names this cluster; squeue's own cluster must agree. Empty: the cluster squeue reports is the local one.").StringVar(&o.SlurmCluster)
	cmd.Flag("command.timeout", "Time limit of each scheduler command.").Default("30s").DurationVar(&o.CommandTimeout)
	cmd.Flag("kubernetes.kubeconfig", "Kubeconfig for reclaiming pods (Eviction API, owner scale-down) and for reading pod labels, annotations and namespace labels for the policy; no Kubernetes actions or facts when empty.").StringVar(&o.Kubeconfig)
	cmd.Flag("kubernetes.in-cluster", "Use the pod's service account for Kubernetes actions.").BoolVar(&o.InCluster)
	cmd.Flag("lease.duration", "How long this analyzer's claim on the store lasts without renewal: a second analyzer on the same store stands by, and takes over this long after the first stops renewing. The leader acts only until two thirds of this after its last renewal (checked right before each act), so one paused past its lease acts on nothing when it wakes.").Default(daemon.DefaultLeaseDuration.String()).DurationVar(&o.LeaseDuration)
	cmd.Flag("kubernetes.lease-namespace", "With Kubernetes access, elect one acting replica through a coordination.k8s.io Lease named gpuwatch-analyzer in this namespace (the others stand by); empty: no election.").Envar("POD_NAMESPACE").StringVar(&o.LeaseNamespace)
	cmd.Flag("jupyterhub.url", "JupyterHub (e.g. http://hub:8081): idle notebooks of KubeSpawner pods are stopped through the Hub API (DELETE /hub/api/users/NAME/server) instead of evicted, when the Hub's record of the server (KubeSpawner's state) names the pod; and a pod no controller owns is interactive only when the Hub's record names it (kind_source \"JupyterHub record\"), batch when it does not, of unknown kind while the Hub cannot be asked (never by its name); needs Kubernetes.").StringVar(&o.JupyterHubURL)
	cmd.Flag("jupyterhub.token-file", "File holding a JupyterHub API token with the scopes list:users, read:servers, admin:server_state and servers (docs/configuration.md); read at each use, never logged.").StringVar(&o.JupyterHubTokenFile)
	cmd.Flag("teams.file", "Teams file (the exporter's --attribution.teams-file format): gives each allocation its team and kind from the facts its scheduler reports, for policy tiers and exemptions by team; without it those cannot be decided and only notify.").StringVar(&o.TeamsFile)
	cmd.Flag("process.local", "Kill orphaned GPU processes on this host (the analyzer runs on the node). Each kill is confirmed right before through this node's NVML (the PID holds memory on the finding's GPU now), /proc (same command, started before the orphan was seen) and the scheduler (no live job owns it); without NVML every kill is refused and audited.").BoolVar(&o.ProcessLocal)
	cmd.Flag("hostname", "This host's name for --process.local; defaults to $NODE_NAME, then the machine's host name.").Envar("NODE_NAME").StringVar(&o.Hostname)
	o.Pools = RegisterPoolFlags(cmd)
	cmd.Flag("report.config", "Report configuration (YAML): adds the weekly report and daily digest jobs; its smtp section also sends email warnings.").StringVar(&o.ReportConfig)
	return cmd.FullCommand(), func(ctx context.Context) error {
		if (o.JupyterHubURL == "") != (o.JupyterHubTokenFile == "") {
			return &clikit.UsageError{Err: errors.New("--jupyterhub.url and --jupyterhub.token-file go together")}
		}
		if o.JupyterHubURL != "" && o.Kubeconfig == "" && !o.InCluster {
			return &clikit.UsageError{Err: errors.New("--jupyterhub.url needs Kubernetes (--kubernetes.kubeconfig or --kubernetes.in-cluster): the pods' annotations name the Hub users")}
		}
		if o.JupyterHubURL != "" {
			if u, err := url.Parse(o.JupyterHubURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return &clikit.UsageError{Err: fmt.Errorf("--jupyterhub.url %s: want http(s)://host:port", configfile.URLOrigin(o.JupyterHubURL))}
			}
			// Read once at start through the secret-file checks, so that a
			// FIFO, a device or a file of several tokens is an exit 2 now,
			// not a stuck or failing cycle later.
			if _, err := secret.ReadWord(o.JupyterHubTokenFile, nil); err != nil {
				return &clikit.UsageError{Err: fmt.Errorf("--jupyterhub.token-file: %w", err)}
			}
		}
		var err error
		if o.QueryLimits, err = queryLimits.Limits(); err != nil {
			return err
		}
		if o.SlurmCluster != "" && !slurm.ValidClusterName(o.SlurmCluster) {
			return &clikit.UsageError{Err: fmt.Errorf("--slurm.cluster %q: not a Slurm cluster name (letters, digits, '.', '_', '-'; at most 63)", o.SlurmCluster)}
		}
		if o.CommandTimeout <= 0 {
			return &clikit.UsageError{Err: fmt.Errorf("--command.timeout must be positive, got %s", o.CommandTimeout)}
		}
		return runAnalyzer(ctx, *o, command.LoggerFrom(ctx), buildinfo.Version())
	}
}
