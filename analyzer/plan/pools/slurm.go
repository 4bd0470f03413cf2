package pools

import (
	"context"
	"strings"

	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
)

// SlurmNodes lists the cluster's nodes as Slurm has them (slurm.Client).
type SlurmNodes interface {
	Nodes(ctx context.Context) ([]slurm.Node, error)
}

// SlurmPartitions names a host's pool from the Slurm partitions its node
// is in, read from `sinfo --json` (one call per plan). A node in several
// partitions (a gpu and a gpu-preempt partition over the same nodes) is
// in the pool named by all of them, joined with "+" in slurm.conf's order,
// so hosts with the same membership share a pool and no host is counted
// twice. Hosts are matched by node name and by NodeHostname.
type SlurmPartitions struct {
	Slurm SlurmNodes
}

// Describe implements Hosts.
func (s *SlurmPartitions) Describe() string { return "Slurm partitions (sinfo --json)" }

// Pools implements Hosts.
func (s *SlurmPartitions) Pools(ctx context.Context, hosts []string) (map[string]string, error) {
	nodes, err := s.Slurm.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		want[h] = true
	}
	out := map[string]string{}
	for _, n := range nodes {
		if len(n.Partitions) == 0 {
			continue
		}
		pool := strings.Join(n.Partitions, "+")
		for _, h := range []string{n.Name, n.Hostname} {
			if h != "" && want[h] {
				out[h] = pool
			}
		}
	}
	return out, nil
}
