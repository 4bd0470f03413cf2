package attribution

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/kubelet"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// FlagGroup is a kingpin Application or CmdClause.
type FlagGroup interface {
	Flag(name, help string) *kingpin.FlagClause
}

// Flags are the attribution flags of the exporter.
type Flags struct {
	KubeEnable        bool
	kubeEnableSet     bool
	KubeSocket        string
	KubeResourceNames []string
	KubeInterval      time.Duration
	KubeTimeout       time.Duration
	JobMapDir         string
	ProcRoot          string
	CgroupRoot        string
	TeamsFile         string

	// Pods is optional pod metadata from the API server. No flag sets it: a
	// binary that links client-go (cmd/gpuwatch, not the lean exporter) may
	// set it before cli.Run, enabling team rules by pod label and CPU time of
	// pods that have no GPU process.
	Pods PodMetadata

	teams *teams.Config
}

// RegisterFlags adds the attribution flags to g.
func RegisterFlags(g FlagGroup) *Flags {
	f := &Flags{}
	g.Flag("kubernetes.enable", "Read which pod holds each GPU from the kubelet's pod-resources API. Default: on when --kubernetes.pod-resources-socket exists.").
		IsSetByUser(&f.kubeEnableSet).BoolVar(&f.KubeEnable)
	g.Flag("kubernetes.pod-resources-socket", "Unix socket of the kubelet's pod-resources API (v1).").
		Default(kubelet.DefaultSocket).StringVar(&f.KubeSocket)
	g.Flag("kubernetes.resource-name", "Extra device-plugin resource whose devices are GPUs, besides nvidia.com/gpu and nvidia.com/mig-*; a trailing * matches a prefix. Repeatable.").
		StringsVar(&f.KubeResourceNames)
	g.Flag("kubernetes.refresh-interval", "How often the pod map is refreshed from the kubelet in the background; a scrape never waits on the kubelet.").
		Default("10s").DurationVar(&f.KubeInterval)
	g.Flag("kubernetes.timeout", "Timeout of one call to the kubelet; the last good pod map is kept when it fails.").
		Default("5s").DurationVar(&f.KubeTimeout)
	g.Flag("hpc-job-mapping-dir", "Folder of job-mapping files written by a batch scheduler's prolog/epilog (dcgm-exporter's format: one file per GPU index or <gpu>.<gpu-instance>, one job per line; gpuwatch's deploy/slurm/prolog adds user, account and job name). Empty: no batch jobs.").
		Default("").StringVar(&f.JobMapDir)
	g.Flag("attribution.proc-root", "proc file system to read GPU processes' command, user and cgroup from (the host's /proc when the exporter runs in a container).").
		Default("/proc").StringVar(&f.ProcRoot)
	g.Flag("attribution.cgroup-root", "cgroup file system to read jobs' CPU time from (cgroup v1 or v2).").
		Default("/sys/fs/cgroup").StringVar(&f.CgroupRoot)
	g.Flag("attribution.teams-file", "YAML file mapping namespaces, accounts, users and pod labels to teams, and job/pod name patterns to kinds (see exporter/attribution/teams). Empty: no teams, built-in kinds.").
		Default("").StringVar(&f.TeamsFile)
	return f
}

// Validate checks the flags and loads the teams file. Its errors are usage errors.
func (f *Flags) Validate() error {
	if f.KubeInterval < 100*time.Millisecond {
		return fmt.Errorf("--kubernetes.refresh-interval must be at least 100ms, got %s", f.KubeInterval)
	}
	if f.KubeTimeout <= 0 {
		return fmt.Errorf("--kubernetes.timeout must be positive, got %s", f.KubeTimeout)
	}
	for _, r := range f.KubeResourceNames {
		if r == "" || r == "*" || strings.ContainsAny(r, " \t") || strings.Count(r, "*") > 1 || strings.Contains(strings.TrimSuffix(r, "*"), "*") {
			return fmt.Errorf("--kubernetes.resource-name %q: want a resource name such as example.com/gpu, optionally ending in *", r)
		}
	}
	if f.JobMapDir != "" {
		if info, err := os.Stat(f.JobMapDir); err == nil && !info.IsDir() {
			return fmt.Errorf("--hpc-job-mapping-dir %s is not a folder", f.JobMapDir)
		}
	}
	if f.TeamsFile != "" {
		t, err := teams.Load(f.TeamsFile)
		if err != nil {
			return fmt.Errorf("--attribution.teams-file: %w", err)
		}
		f.teams = t
	}
	return nil
}

// KubernetesEnabled says whether the kubelet is read: as the flag says, or,
// when it is not given, whether the socket exists.
func (f *Flags) KubernetesEnabled() bool {
	if f.kubeEnableSet {
		return f.KubeEnable
	}
	info, err := os.Stat(f.KubeSocket)
	return err == nil && info.Mode()&os.ModeSocket != 0
}

// Options turns the flags into chain options; Validate must have run. src
// may offer MIG UUID resolution (ResolveMIGUUID), which NVML can answer.
func (f *Flags) Options(logger *slog.Logger, clock source.Clock, src source.Source, reg prometheus.Registerer) Options {
	o := Options{
		JobMapDir: f.JobMapDir, ProcRoot: f.ProcRoot, CgroupRoot: f.CgroupRoot,
		Teams: f.teams, Pods: f.Pods, Logger: logger, Clock: clock, Registerer: reg,
	}
	if f.KubernetesEnabled() {
		o.Kubelet = &kubelet.Options{
			Socket:        f.KubeSocket,
			ResourceNames: append(append([]string{}, kubelet.DefaultResourceNames...), f.KubeResourceNames...),
			Interval:      f.KubeInterval, Timeout: f.KubeTimeout,
		}
	}
	if r, ok := src.(interface {
		ResolveMIGUUID(string) (string, int, bool)
	}); ok {
		o.MIG = r.ResolveMIGUUID
	}
	return o
}
