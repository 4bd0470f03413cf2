// Package escalation is the pure core of the analyzer's escalation: from a
// finding, what the policy says of it, and what has already happened in its
// episode, Plan says which steps to take now and why the others wait. It
// reads no store and calls no actuator; the daemon reads the history once,
// runs the plan through the audit log and the actuators, and comes back to
// Plan when an outcome differs from the one the plan assumed.
package escalation

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Kind is what a planned step does.
type Kind int

const (
	// Note writes a settled, skipped audit record that says why nothing was
	// done; its name makes it a one-off per episode.
	Note Kind = iota
	// Act runs a policy step through its actuators, audited before and after.
	Act
	// Defer ends the plan: nothing more is due this cycle, for Reason.
	Defer
)

func (k Kind) String() string {
	switch k {
	case Note:
		return "note"
	case Act:
		return "act"
	default:
		return "defer"
	}
}

// Reasons a plan is deferred.
const (
	NotDue       = "not due"
	AwaitWarning = "no warning delivered min_warning ago"
	RateLimited  = "rate limited"
	AwaitFacts   = "facts missing: nothing but a notification"
	AwaitRetry   = "failed; waiting out the retry backoff"
	GaveUp       = "failed too often; given up for this episode"
)

// Note names that are not policy steps.
const (
	NoteExempt = "exempt"
	NoteFacts  = "facts"
	NoteGaveUp = "gave_up"
	// NoteTarget: the scheduler's facts show another workload under the
	// finding's id (analyzer/target); no step is taken.
	NoteTarget = "target"
)

// Step is one planned step.
type Step struct {
	Kind Kind
	// Name is the step's name within its episode, the last part of its
	// idempotency key: for an Act, the action ("warn") with "+dry_run" for
	// dry-run steps (StepName); for a note about a policy step, the bare
	// action, as a note says the same whether or not the policy is dry-run;
	// otherwise a note's own name.
	Name   string
	Action policy.StepAction // Act, and notes about a policy step
	Reason string            // Note and Defer
	DryRun bool
	Signal string // checkpoint
	// Actuators are the names the step goes to (Act), joined with "," in
	// the audit; at least one of them is wired, and the others are passed
	// over.
	Actuators []string
	// NextStep and NextStepAt announce the step that follows, for messages.
	NextStep   policy.StepAction
	NextStepAt time.Time
}

// Past is what the audit holds of one step of the episode.
type Past struct {
	// Failed: the step ran and failed, and may run again.
	Failed bool
	// Delivered: the step is done (not skipped, not a dry run).
	Delivered bool
	// At is when the step finished, or was intended if it has no outcome yet.
	At time.Time
	// Attempts is how often the step was tried.
	Attempts int
}

// History is what has happened in a finding's episode.
type History struct {
	Steps map[string]Past
	// JobTaken names the disruptive steps (by Name) already taken or in
	// flight for the same job under another finding, such as the same job's
	// finding on another host: a job is signalled or cancelled once.
	JobTaken map[string]bool
}

// Budget is what the rate limits leave for real reclaims.
type Budget struct{ PerCycle, PerHour, Cycle, Hour int }

// Allows reports whether one more real reclaim fits.
func (b Budget) Allows() bool { return b.Cycle < b.PerCycle && b.Hour < b.PerHour }

// Spend counts one real reclaim.
func (b *Budget) Spend() { b.Cycle++; b.Hour++ }

// Input is everything a plan depends on.
type Input struct {
	Finding *finding.Finding
	Eval    policy.Evaluation
	Policy  *policy.Policy
	// Episode is when the finding's escalation episode began.
	Episode time.Time
	History History
	Budget  Budget
	Now     time.Time
	// Wired reports whether an actuator of that name is configured.
	Wired func(name string) bool
}

// StepName names a step in its idempotency key. Dry-run steps have keys of
// their own: when a policy leaves dry-run, an episode in progress sends a
// real warning and waits the minimum warning time again before it acts,
// instead of treating its dry-run steps as done.
func StepName(a policy.StepAction, dryRun bool) string {
	if dryRun {
		return string(a) + "+dry_run"
	}
	return string(a)
}

// Plan returns the steps due now, in order, assuming that each Act ends
// done at Now. When an Act ends otherwise, the caller stops (failed) or
// plans again with the outcome in the history (skipped, dry run). A plan
// that stops early ends with a Defer saying why.
func Plan(in Input) []Step {
	p := &planner{in: in, budget: in.Budget, planned: map[string]Past{}}
	ev := &in.Eval
	if ev.Exempt {
		p.note(NoteExempt, "", ev.ExemptReason)
		return p.out
	}
	if ev.Missing != "" {
		p.note(NoteFacts, "", "facts missing, no tier applies (at most notify): "+ev.Missing)
	}
	if ev.Rule == nil || !ev.Qualifies {
		return p.out
	}
	for i := range ev.Rule.Steps {
		if !p.step(i) {
			break
		}
	}
	return p.out
}

// planner holds what one plan has decided so far.
type planner struct {
	in      Input
	out     []Step
	planned map[string]Past // the outcomes this plan assumes
	budget  Budget
	// The previous step's time and delay: a step is never due sooner after
	// the previous one than the policy spaces them.
	prevAt    time.Time
	prevAfter time.Duration
}

func (p *planner) note(name string, a policy.StepAction, why string) {
	if _, done := p.in.History.Steps[name]; !done {
		p.out = append(p.out, Step{Kind: Note, Name: name, Action: a, Reason: why})
	}
}

func (p *planner) deferred(name string, a policy.StepAction, why string) bool {
	p.out = append(p.out, Step{Kind: Defer, Name: name, Action: a, Reason: why})
	return false
}

func (p *planner) past(name string) (Past, bool) {
	if r, ok := p.planned[name]; ok {
		return r, true
	}
	r, ok := p.in.History.Steps[name]
	return r, ok
}

// step plans the rule's i-th step and reports whether the steps after it
// may be planned too.
func (p *planner) step(i int) bool {
	in, ev := &p.in, &p.in.Eval
	st := ev.Rule.Steps[i]
	name := StepName(st.Action, ev.DryRun)
	// A step is due After the episode began, and never sooner after the
	// previous step than the policy spaces them: when the minimum warning
	// time holds a checkpoint back, the reclaim still leaves the job the
	// time to checkpoint.
	due := in.Episode.Add(st.After)
	if !p.prevAt.IsZero() {
		if d := p.prevAt.Add(st.After - p.prevAfter); d.After(due) {
			due = d
		}
	}
	if in.Now.Before(due) {
		return p.deferred(name, st.Action, NotDue)
	}
	if r, ok := p.past(name); ok && !r.Failed {
		// Settled, or intended and awaiting reconciliation.
		p.prevAt, p.prevAfter = r.At, st.After
		return true
	} else if ok {
		if retry := in.Policy.Retry; retry.GivesUp(r.Attempts) {
			p.note(NoteGaveUp, st.Action, fmt.Sprintf("gave up %s after %d failed attempts", st.Action, r.Attempts))
			return p.deferred(name, st.Action, GaveUp)
		} else if in.Now.Before(r.At.Add(retry.Backoff(r.Attempts))) {
			return p.deferred(name, st.Action, AwaitRetry)
		}
	}
	p.prevAt, p.prevAfter = in.Now, st.After
	return p.act(i, name)
}

// act plans a due step that has not run, or failed and may run again.
func (p *planner) act(i int, name string) bool {
	in, ev := &p.in, &p.in.Eval
	st := ev.Rule.Steps[i]
	switch {
	case ev.Missing != "" && st.Action != policy.StepNotify:
		return p.deferred(name, st.Action, AwaitFacts)
	case st.Action == policy.StepReclaim && !ev.ReclaimAllowed:
		tier := ""
		if ev.Tier != nil {
			tier = ev.Tier.Name
		}
		p.note(string(st.Action), st.Action, "reclaim not allowed in tier "+tier)
		return true
	case st.Action.Disruptive() && !p.warnedLongEnough():
		return p.deferred(name, st.Action, AwaitWarning)
	case st.Action == policy.StepReclaim && !ev.DryRun && !p.budget.Allows():
		return p.deferred(name, st.Action, RateLimited)
	case st.Action.Disruptive() && in.History.JobTaken[name]:
		p.note(string(st.Action), st.Action, "already taken for job "+in.Finding.Job+" through another host's finding")
		return true
	}
	names := routes(in.Policy, st, in.Finding)
	if !anyWired(names, in.Wired) {
		what := "a channel"
		if len(names) > 0 {
			what = strings.Join(names, ",")
		}
		p.note(string(st.Action), st.Action, "no actuator configured for "+what)
		return true
	}
	s := Step{Kind: Act, Name: name, Action: st.Action, DryRun: ev.DryRun, Signal: st.Signal, Actuators: names}
	for _, next := range ev.Rule.Steps[i+1:] {
		if next.Action == policy.StepReclaim && !ev.ReclaimAllowed {
			continue // never announce what the tier does not allow
		}
		s.NextStep, s.NextStepAt = next.Action, in.Episode.Add(next.After)
		break
	}
	p.out = append(p.out, s)
	p.planned[name] = Past{Delivered: true, At: in.Now}
	if st.Action == policy.StepReclaim && !ev.DryRun {
		p.budget.Spend()
	}
	return true
}

// warnedLongEnough: disruptive steps wait until a warning (of the same
// dry-run mode) was delivered at least min_warning ago.
func (p *planner) warnedLongEnough() bool {
	w, ok := p.past(StepName(policy.StepWarn, p.in.Eval.DryRun))
	if !ok || !w.Delivered {
		return false
	}
	return !p.in.Now.Before(w.At.Add(p.in.Policy.MinWarning))
}

// routes names the actuators a step goes through: the policy's channels for
// notify and warn, the finding's reclaim target otherwise.
func routes(p *policy.Policy, st policy.Step, f *finding.Finding) []string {
	if st.Action == policy.StepNotify || st.Action == policy.StepWarn {
		return p.ChannelsFor(st)
	}
	return []string{Target(f)}
}

// Target names the actuator that reclaims or signals f.
func Target(f *finding.Finding) string {
	switch {
	case f.Pattern == schema.OrphanProcess:
		return "process"
	case f.Scheduler == schema.SchedulerKubernetes || (f.Scheduler == "" && f.Pod != ""):
		return schema.SchedulerKubernetes
	default:
		return schema.SchedulerSlurm
	}
}

func anyWired(names []string, wired func(string) bool) bool {
	for _, n := range names {
		if wired != nil && wired(n) {
			return true
		}
	}
	return false
}
