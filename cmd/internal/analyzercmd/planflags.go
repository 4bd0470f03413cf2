package analyzercmd

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/analyzer/kube"
	"github.com/gpuwatch/gpuwatch/analyzer/plan"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
	"github.com/gpuwatch/gpuwatch/internal/clikit"
)

// PoolFlags are the flags that say where the capacity planner's node pools
// come from, shared by `plan` and the analyzer daemon (its Planner tab,
// report section and metrics), so that every surface pools alike.
type PoolFlags struct {
	Label, MapFile, NodeLabel   string
	NodeLabels, SlurmPartitions bool
	AcrossUsers                 bool
}

// RegisterPoolFlags adds the pool flags to cmd.
func RegisterPoolFlags(cmd *kingpin.CmdClause) *PoolFlags {
	f := &PoolFlags{}
	cmd.Flag("pool.label", "Series label (e.g. added by a relabel rule) naming a GPU's node pool; first in order, before --pool.map and node labels. "+
		"Without any of them a pool is the GPU model and the node group (the host name before its trailing number), and the plan says so.").StringVar(&f.Label)
	cmd.Flag("pool.map", "Host map file (YAML: a list of {host, pool}; host is a name or a glob such as gpu-a-*): the first rule that matches a host names its pool.").StringVar(&f.MapFile)
	cmd.Flag("pool.kubernetes-nodes", "Name pools from the Kubernetes Node labels (--pool.kubernetes-node-label, or the first of "+
		"cloud.google.com/gke-nodepool, eks.amazonaws.com/nodegroup, kubernetes.azure.com/agentpool, karpenter.sh/nodepool, node.kubernetes.io/instance-type), read from the API server; needs Kubernetes access.").BoolVar(&f.NodeLabels)
	cmd.Flag("pool.kubernetes-node-label", "The Node label naming the pool for --pool.kubernetes-nodes.").StringVar(&f.NodeLabel)
	cmd.Flag("pool.slurm-partitions", "Name pools from the Slurm partitions each node is in (sinfo --json, --slurm.sinfo); a node in several is in the pool named by all of them, joined with +.").BoolVar(&f.SlurmPartitions)
	cmd.Flag("pool.time-slice-across-users", "Let the plan time-slice different users' work on one GPU, where its tenants share memory and faults (one out-of-memory or Xid error reaches all). "+
		"Off: a time-sliced GPU holds one user's work only (where the data names no user, one team's or one Kubernetes namespace's; else one allocation's), and work of different users shares a GPU only through MIG slices, which isolate them.").BoolVar(&f.AcrossUsers)
	return f
}

// Apply sets o's pools from the flags; kc is the API client, or nil, and
// sl the Slurm client.
func (f *PoolFlags) Apply(o *plan.Options, kc *kube.Client, sl pools.SlurmNodes) error {
	o.PoolLabel = f.Label
	o.TimeSliceAcrossUsers = f.AcrossUsers
	if f.MapFile != "" {
		m, err := pools.LoadMap(f.MapFile)
		if err != nil {
			return &clikit.UsageError{Err: fmt.Errorf("--pool.map: %w", err)}
		}
		o.HostMap = m
	}
	if f.NodeLabel != "" && !f.NodeLabels {
		return &clikit.UsageError{Err: fmt.Errorf("--pool.kubernetes-node-label needs --pool.kubernetes-nodes")}
	}
	if f.NodeLabels {
		if kc == nil {
			return &clikit.UsageError{Err: fmt.Errorf("--pool.kubernetes-nodes needs Kubernetes access (--kubernetes.kubeconfig or --kubernetes.in-cluster)")}
		}
		o.Hosts = &kube.Nodes{Core: kc.Core, Label: f.NodeLabel}
	}
	if f.SlurmPartitions {
		if f.NodeLabels {
			return &clikit.UsageError{Err: fmt.Errorf("--pool.slurm-partitions and --pool.kubernetes-nodes: give one")}
		}
		o.Hosts = &pools.SlurmPartitions{Slurm: sl}
	}
	return nil
}
