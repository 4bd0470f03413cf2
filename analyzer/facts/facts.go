// Package facts is what the analyzer learns about an allocation from the
// system that owns it, at decision time: Slurm (one squeue call per cycle)
// or the Kubernetes API server (one list of pods and of namespaces per
// cycle, kube.Facts in the Kubernetes adapter analyzer/kube). The
// attributes a policy may match are defined once, in
// schema.AllocationAttrs; every one of them is filled by at least one Source.
package facts

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Facts are what the owner of one allocation says about it now.
type Facts struct {
	// Scheduler is slurm, kubernetes, or "" for an allocation no scheduler
	// owns (an orphaned process): then no attribute applies.
	Scheduler string
	// Alloc holds the attributes the owner reported; known says which.
	Alloc schema.Allocation
	known map[schema.Attr]bool
	// Missing holds, for each attribute that applies to this allocation but
	// could not be had, why (scheduler down, job gone, access refused).
	Missing map[schema.Attr]string
	// Gone is set when the scheduler answered but no longer knows the job:
	// it ended and was cleaned up, the usual fate of a finished job, so its
	// facts are missing without anything being wrong.
	Gone bool
	// State is the job's state (Slurm) or the pod's phase, for the audit.
	State     string
	Start     time.Time
	TimeLimit time.Duration
	// Identity is which workload the job id names now, as its owner says.
	Identity Identity
	// KindSource says what decided the kind attribute: the owner ("owner
	// Notebook kubeflow.org/v1 research/nb-1", "Slurm batch flag") or
	// "name" (the teams file's or gpuwatch's name patterns, the last resort).
	KindSource string
	// OwnerKind is the kind the owner implies when no name rule says more
	// (an sbatch script is batch unless, like an Open OnDemand app, a kind
	// rule names it interactive); OwnerKindSource says which owner fact.
	OwnerKind, OwnerKindSource string
}

// KindFromName is the KindSource of a kind decided by names alone.
const KindFromName = "name"

// SetOwnerKind records a kind the owner decides (a Notebook's pod, an salloc
// session): no name can change it.
func (f *Facts) SetOwnerKind(kind, source string) {
	f.Set(schema.AttrKind, kind)
	f.KindSource = source
}

// Identity is what the owner says of the workload a job id names now:
// where it runs, since when, in which cluster. The target proof
// (analyzer/target) compares it with where and since when the evidence
// was seen, because job ids collide across clusters and start again
// after a controller is rebuilt, and pod names are reused.
type Identity struct {
	// Nodes are the nodes the workload runs on: the job's host list
	// expanded, or the pod's node; none while it runs nowhere.
	Nodes []string
	// NodesErr says why the owner's node list could not be read.
	NodesErr string
	// Cluster is the cluster whose controller reported the job (Slurm).
	Cluster string
	// Since is when this workload began: the job's start, the pod's
	// creation (a pod recreated under its name is another workload).
	Since time.Time
	// UID is the pod's UID (Kubernetes).
	UID string
}

// Zero reports whether the owner said nothing of the workload's identity.
func (id *Identity) Zero() bool {
	return len(id.Nodes) == 0 && id.NodesErr == "" && id.Cluster == "" && id.Since.IsZero() && id.UID == ""
}

// Applies reports whether a is an attribute of allocations of f's scheduler.
func (f *Facts) Applies(a schema.Attr) bool {
	for _, s := range a.Spec().Sources {
		if s == f.Scheduler {
			return true
		}
	}
	return false
}

// Value returns a scalar attribute; why is set when it applies but is missing.
func (f *Facts) Value(a schema.Attr) (v string, ok bool, why string) {
	if why, missing := f.Missing[a]; missing {
		return "", false, why
	}
	if !f.Applies(a) {
		return "", false, ""
	}
	return f.Alloc.Value(a), true, ""
}

// Map returns a map attribute; why is set when it applies but is missing.
func (f *Facts) Map(a schema.Attr) (m map[string]string, ok bool, why string) {
	if why, missing := f.Missing[a]; missing {
		return nil, false, why
	}
	if !f.Applies(a) {
		return nil, false, ""
	}
	return f.Alloc.Map(a), true, ""
}

// Set records what the owner says of a scalar attribute.
func (f *Facts) Set(a schema.Attr, v string) {
	if f.Alloc.Set(a, v) {
		f.know(a)
	}
}

// SetMap records what the owner says of a map attribute.
func (f *Facts) SetMap(a schema.Attr, m map[string]string) {
	if m == nil {
		m = map[string]string{}
	}
	if f.Alloc.SetMap(a, m) {
		f.know(a)
	}
}

func (f *Facts) know(a schema.Attr) {
	if f.known == nil {
		f.known = map[schema.Attr]bool{}
	}
	f.known[a] = true
}

// MarkMissing marks every attribute of the scheduler that is not yet known as
// missing for why.
func (f *Facts) MarkMissing(why string) {
	for _, s := range schema.MatchAttrs() {
		if !f.Applies(s.Attr) {
			continue
		}
		if f.known[s.Attr] {
			continue
		}
		if f.Missing == nil {
			f.Missing = map[schema.Attr]string{}
		}
		if _, ok := f.Missing[s.Attr]; !ok {
			f.Missing[s.Attr] = why
		}
	}
}

// Source looks up the facts of one scheduler's allocations. Lookup makes a
// bounded number of calls whatever the number of jobs (one for Slurm, two
// for Kubernetes) and returns facts by job id (hpc_job, or namespace/pod);
// a job it does not know is absent. An error means nothing could be had.
type Source interface {
	Scheduler() string
	Lookup(ctx context.Context, jobs []string) (map[string]*Facts, error)
}

// Resolver asks each finding's owner for its facts, once per cycle.
type Resolver struct {
	// Sources by scheduler name; a scheduler without one has every fact
	// missing, so its findings are never reclaimed under a tier that needs one.
	Sources map[string]Source
	// Teams applies the teams file (team and kind rules) to the facts; nil
	// leaves the team missing and classifies kinds by gpuwatch's defaults.
	Teams *teams.Config
}

// SchedulerOf names the scheduler that owns f's allocation, or "" for an
// orphaned process, which no scheduler owns.
func SchedulerOf(f *finding.Finding) string {
	switch {
	case f.Pattern == schema.OrphanProcess:
		return ""
	case f.Scheduler != "":
		return f.Scheduler
	case f.Pod != "":
		return schema.SchedulerKubernetes
	default:
		return schema.SchedulerSlurm
	}
}

// Resolve returns the facts of each finding, in order: one Lookup per
// scheduler with findings.
func (r *Resolver) Resolve(ctx context.Context, fs []finding.Finding) []*Facts {
	jobs := map[string][]string{}
	seen := map[string]bool{}
	for i := range fs {
		s := SchedulerOf(&fs[i])
		if s == "" || seen[s+"\x00"+fs[i].Job] {
			continue
		}
		seen[s+"\x00"+fs[i].Job] = true
		jobs[s] = append(jobs[s], fs[i].Job)
	}
	found := map[string]map[string]*Facts{}
	failed := map[string]string{}
	for s, js := range jobs {
		src, ok := r.Sources[s]
		if !ok || src == nil {
			failed[s] = "no " + s + " fact source configured"
			continue
		}
		m, err := src.Lookup(ctx, js)
		if err != nil {
			failed[s] = err.Error()
			continue
		}
		found[s] = m
	}
	out := make([]*Facts, len(fs))
	for i := range fs {
		f := &fs[i]
		s := SchedulerOf(f)
		fa := &Facts{Scheduler: s}
		switch {
		case s == "":
		case failed[s] != "":
			fa.MarkMissing(failed[s])
		case found[s][f.Job] == nil:
			fa.Gone = true
			fa.MarkMissing(fmt.Sprintf("%s does not know job %s (gone)", s, f.Job))
		default:
			c := *found[s][f.Job]
			fa = &c
			fa.Scheduler = s
			r.derive(fa, f)
		}
		out[i] = fa
	}
	return out
}

// derive applies the teams file to the owner's facts: team and kind, unless
// the owner named them itself.
func (r *Resolver) derive(fa *Facts, f *finding.Finding) {
	a := source.Allocation{Scheduler: fa.Scheduler, User: fa.Alloc.User, Account: fa.Alloc.Account,
		JobName: fa.Alloc.JobName, Namespace: fa.Alloc.Namespace, Labels: fa.Alloc.PodLabels,
		Team: fa.Alloc.Team}
	if fa.Scheduler == schema.SchedulerKubernetes {
		a.Pod = f.Pod
	}
	r.Teams.Apply(&a)
	// The facts of one job are shared by its findings: copy what changes.
	fa.known = maps.Clone(fa.known)
	fa.deriveKind(r.Teams, &a)
	if a.Team != "" || r.Teams != nil {
		fa.Set(schema.AttrTeam, a.Team)
		return
	}
	fa.Missing = maps.Clone(fa.Missing)
	if fa.Missing == nil {
		fa.Missing = map[schema.Attr]string{}
	}
	fa.Missing[schema.AttrTeam] = "no teams file given to the analyzer"
}

// deriveKind decides the kind: the owner's word when it gave one, then a
// name rule, then the kind the owner implies, and batch only when nothing
// at all says otherwise. A kind the owner could not say (JupyterHub
// unreachable for a pod no controller owns) stays missing: no name decides it.
func (fa *Facts) deriveKind(t *teams.Config, a *source.Allocation) {
	if _, missing := fa.Missing[schema.AttrKind]; missing {
		return
	}
	if fa.known[schema.AttrKind] {
		if fa.KindSource == "" {
			fa.KindSource = fa.Scheduler + " (owner)"
		}
		return
	}
	if k, ok := t.MatchKind(a); ok {
		fa.Set(schema.AttrKind, k)
		fa.KindSource = KindFromName
		return
	}
	if fa.OwnerKind != "" {
		fa.SetOwnerKind(fa.OwnerKind, fa.OwnerKindSource)
		return
	}
	fa.Set(schema.AttrKind, schema.KindBatch)
	fa.KindSource = KindFromName
}

// Table is a Source with fixed answers: the simulated fleet's scheduler,
// whose scenario is the owner of its jobs.
type Table struct {
	Name string
	Jobs map[string]*Facts
}

// Scheduler implements Source.
func (t *Table) Scheduler() string { return t.Name }

// Lookup implements Source.
func (t *Table) Lookup(_ context.Context, jobs []string) (map[string]*Facts, error) {
	out := make(map[string]*Facts, len(jobs))
	for _, j := range jobs {
		if f, ok := t.Jobs[j]; ok {
			out[j] = f
		}
	}
	return out, nil
}

// SlurmJob builds the facts squeue would report.
func SlurmJob(partition, qos, account, user, jobName string) *Facts {
	f := &Facts{Scheduler: schema.SchedulerSlurm, State: "RUNNING"}
	f.Set(schema.AttrPartition, partition)
	f.Set(schema.AttrQoS, qos)
	f.Set(schema.AttrAccount, account)
	f.Set(schema.AttrUser, user)
	f.Set(schema.AttrJobName, jobName)
	return f
}

// Pod builds the facts the API server would report.
func Pod(namespace, owner string, labels, annotations, namespaceLabels map[string]string) *Facts {
	f := &Facts{Scheduler: schema.SchedulerKubernetes, State: "Running"}
	f.Set(schema.AttrNamespace, namespace)
	f.Set(schema.AttrOwner, owner)
	f.SetMap(schema.AttrPodLabels, labels)
	f.SetMap(schema.AttrPodAnnotations, annotations)
	f.SetMap(schema.AttrNamespaceLabels, namespaceLabels)
	return f
}

// Unreachable is the source of a scheduler that could not be asked (its
// command is installed but reaches no controller): every lookup fails with
// Err, so decisions name the missing facts and why, and only notify.
type Unreachable struct {
	Name string
	Err  error
}

// Scheduler implements Source.
func (u *Unreachable) Scheduler() string { return u.Name }

// Lookup implements Source.
func (u *Unreachable) Lookup(context.Context, []string) (map[string]*Facts, error) {
	return nil, u.Err
}
