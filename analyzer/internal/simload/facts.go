package simload

import (
	"time"

	"github.com/gpuwatch/gpuwatch/schema"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// FactSources answers for a simulated fleet's schedulers, replayed from
// origin: the scenario is the owner of its jobs. A Slurm workload's
// partition and QoS come from its labels "partition" and "qos"; a pod's
// labels are its labels. Each runs on its node from its first start (a
// repeating scenario's later runs keep that start, so they too began
// before their evidence), and a pod's UID is made from its name.
func FactSources(sc *sim.Scenario, origin time.Time) map[string]facts.Source {
	slurm := &facts.Table{Name: schema.SchedulerSlurm, Jobs: map[string]*facts.Facts{}}
	kube := &facts.Table{Name: schema.SchedulerKubernetes, Jobs: map[string]*facts.Facts{}}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		if w.Scheduler == schema.SchedulerKubernetes {
			ann := map[string]string{}
			if v, ok := w.Labels[schema.ExemptKey]; ok {
				ann[schema.ExemptKey] = v
			}
			f := facts.Pod(w.Namespace, "", w.Labels, ann, nil)
			f.Set(schema.AttrTeam, w.Team)
			f.Set(schema.AttrKind, w.Kind)
			f.Identity = facts.Identity{Nodes: []string{w.Node}, Since: origin.Add(w.Start), UID: "sim-" + w.Namespace + "-" + w.ID}
			kube.Jobs[w.Namespace+"/"+w.ID] = f
			continue
		}
		f := facts.SlurmJob(w.Labels[string(schema.AttrPartition)], w.Labels[string(schema.AttrQoS)], w.Account, w.User, w.JobName)
		f.Set(schema.AttrTeam, w.Team)
		f.Set(schema.AttrKind, w.Kind)
		f.Identity = facts.Identity{Nodes: []string{w.Node}, Since: origin.Add(w.Start)}
		slurm.Jobs[w.ID] = f
	}
	return map[string]facts.Source{schema.SchedulerSlurm: slurm, schema.SchedulerKubernetes: kube}
}
