package simload

import (
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// FactSources answers for a simulated fleet's schedulers: the scenario is the
// owner of its jobs. A Slurm workload's partition and QoS come from its
// labels "partition" and "qos"; a pod's labels are its labels.
func FactSources(sc *sim.Scenario) map[string]facts.Source {
	slurm := &facts.Table{Name: facts.Slurm, Jobs: map[string]*facts.Facts{}}
	kube := &facts.Table{Name: facts.Kubernetes, Jobs: map[string]*facts.Facts{}}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		if w.Scheduler == source.SchedulerKubernetes {
			ann := map[string]string{}
			if v, ok := w.Labels[facts.ExemptKey]; ok {
				ann[facts.ExemptKey] = v
			}
			f := facts.Pod(w.Namespace, "", w.Labels, ann, nil)
			f.Values[facts.Team], f.Values[facts.Kind] = w.Team, w.Kind
			kube.Jobs[w.Namespace+"/"+w.ID] = f
			continue
		}
		f := facts.SlurmJob(w.Labels["partition"], w.Labels["qos"], w.Account, w.User, w.JobName)
		f.Values[facts.Team], f.Values[facts.Kind] = w.Team, w.Kind
		slurm.Jobs[w.ID] = f
	}
	return map[string]facts.Source{facts.Slurm: slurm, facts.Kubernetes: kube}
}
