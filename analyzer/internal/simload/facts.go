package simload

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// FactSources answers for a simulated fleet's schedulers: the scenario is the
// owner of its jobs. A Slurm workload's partition and QoS come from its
// labels "partition" and "qos"; a pod's labels are its labels.
func FactSources(sc *sim.Scenario) map[string]facts.Source {
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
			kube.Jobs[w.Namespace+"/"+w.ID] = f
			continue
		}
		f := facts.SlurmJob(w.Labels[string(schema.AttrPartition)], w.Labels[string(schema.AttrQoS)], w.Account, w.User, w.JobName)
		f.Set(schema.AttrTeam, w.Team)
		f.Set(schema.AttrKind, w.Kind)
		slurm.Jobs[w.ID] = f
	}
	return map[string]facts.Source{schema.SchedulerSlurm: slurm, schema.SchedulerKubernetes: kube}
}
