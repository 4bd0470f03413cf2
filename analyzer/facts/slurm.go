package facts

import (
	"context"

	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/schema"
)

// SlurmSource reads the facts of every job with one `squeue --json` per
// cycle, through the Slurm adapter (analyzer/slurm), which reads identity
// only from JSON: a job name is user text and cannot pose as another field.
type SlurmSource struct {
	Runner execrun.Runner
	// Squeue is the squeue program (default "squeue").
	Squeue string
}

// Scheduler implements Source.
func (s *SlurmSource) Scheduler() string { return schema.SchedulerSlurm }

// Lookup implements Source with one squeue call.
func (s *SlurmSource) Lookup(ctx context.Context, jobs []string) (map[string]*Facts, error) {
	c := &slurm.Client{Runner: s.Runner, Squeue: s.Squeue}
	all, err := c.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	want := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		want[j] = true
	}
	res := make(map[string]*Facts, len(jobs))
	for _, j := range all {
		for _, id := range []string{j.ID, j.Alias} {
			if id == "" || !want[id] {
				continue
			}
			f := &Facts{Scheduler: schema.SchedulerSlurm, State: j.State, Start: j.Start, TimeLimit: j.TimeLimit,
				Identity: SlurmIdentity(&j)}
			f.Set(schema.AttrPartition, j.Partition)
			f.Set(schema.AttrQoS, j.QoS)
			f.Set(schema.AttrAccount, j.Account)
			f.Set(schema.AttrUser, j.User)
			f.Set(schema.AttrJobName, j.Name)
			slurmKind(f, &j)
			res[id] = f
		}
	}
	return res, nil
}

// SlurmIdentity is the identity of the workload Slurm's job j is: its
// nodes (the host list expanded, bounded), cluster and start.
func SlurmIdentity(j *slurm.Job) Identity {
	id := Identity{Cluster: j.Cluster, Since: j.Start}
	nodes, err := slurm.ExpandHostlist(j.Nodes)
	if err != nil {
		id.NodesErr = err.Error()
	} else {
		id.Nodes = nodes
	}
	return id
}

// SlurmBatchFlag is the KindSource of a kind Slurm's batch flag decided.
const SlurmBatchFlag = "Slurm batch flag"

// slurmKind reads the kind from Slurm's batch flag, which only Slurm sets:
// an allocation without a batch script (salloc, srun --pty) is an
// interactive session whatever its name. A batch script is batch unless a
// kind rule names it interactive: Open OnDemand's interactive apps are
// sbatch scripts.
func slurmKind(f *Facts, j *slurm.Job) {
	switch {
	case j.Batch == nil:
	case !*j.Batch:
		f.SetOwnerKind(schema.KindInteractive, SlurmBatchFlag)
	default:
		f.OwnerKind, f.OwnerKindSource = schema.KindBatch, SlurmBatchFlag
	}
}
