package sim

import (
	"slices"
	"time"
)

// Expectation is the ground truth of one allocation of a scenario: which
// waste patterns an analyzer should find on it (none for a healthy job).
type Expectation struct {
	Hostname  string
	Job       string // hpc_job id, or namespace/pod
	Patterns  []string
	Kind      string
	Team      string
	User      string
	Account   string
	Scheduler string
	JobName   string
	Model     string // modelName of its GPUs
	Behaviour string
	GPUs      int   // GPUs (or MIG instances) held
	GPUIndex  []int // their indexes (the parent GPU for MIG)
	MIG       *MIGRef
	// StartOffset and EndOffset are the allocation's span from the origin;
	// Start and End are the same instants on the origin given.
	StartOffset, EndOffset time.Duration
	Start, End             time.Time
	// ProcessEnd is when an orphaned process finally exits (zero when it
	// never does, or the job has no orphan).
	ProcessEnd time.Time
}

// Healthy reports whether no finding is expected.
func (e *Expectation) Healthy() bool { return len(e.Patterns) == 0 }

// Expectations lists the ground truth of every workload, in file order,
// on the scenario's origin (the zero time when it has none: then use
// ExpectationsAt with the source's Origin). Replays of a repeating scenario
// are not listed.
func (s *Scenario) Expectations() []Expectation { return s.ExpectationsAt(s.Origin) }

// ExpectationsAt is Expectations on the given origin (Source.Origin()).
func (s *Scenario) ExpectationsAt(origin time.Time) []Expectation {
	models := map[string]string{}
	for _, n := range s.Nodes {
		models[n.Hostname] = n.Model.Name
	}
	out := make([]Expectation, 0, len(s.Workloads))
	for i := range s.Workloads {
		w := &s.Workloads[i]
		e := Expectation{
			Hostname: w.Node, Job: w.fullJobID(0), Patterns: slices.Clone(w.Expect),
			Kind: w.Kind, Team: w.Team, User: w.User, Account: w.Account, Scheduler: w.Scheduler,
			JobName: w.JobName, Model: models[w.Node], Behaviour: string(w.Behaviour),
			GPUs: len(w.GPUs), GPUIndex: slices.Clone(w.GPUs),
			StartOffset: w.Start, EndOffset: w.End,
			Start: origin.Add(w.Start), End: origin.Add(w.End),
		}
		if e.Patterns == nil {
			e.Patterns = []string{}
		}
		if w.MIG != nil {
			m := *w.MIG
			e.MIG, e.GPUs, e.GPUIndex = &m, 1, []int{m.GPU}
		}
		if w.Behaviour == Orphan && w.Params.OrphanFor > 0 {
			e.ProcessEnd = e.End.Add(w.Params.OrphanFor)
		}
		out = append(out, e)
	}
	return out
}
