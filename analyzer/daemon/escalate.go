// Package daemon runs the analyzer: on a cron schedule it takes the cycle's
// findings, escalates them under the policy through the actuators, and
// writes every step to the audit log before and after it runs. After a
// restart it first reconciles steps that were interrupted between the two
// writes. It never acts on unknown or stale data, on exempt allocations,
// past the rate limits, or twice.
package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/escalation"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/leader"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Results counted by the actions metric besides audit states.
const (
	ResultRateLimited = "rate_limited"
	ResultReconciled  = "reconciled"
)

// Escalator applies the policy to findings.
type Escalator struct {
	Policy *policy.Policy
	Log    *audit.Log
	// Actuators by name: slurm, kubernetes, process (reclaim targets) and
	// webhook, alertmanager, email (channels). A missing one skips its steps.
	Actuators map[string]action.Actuator
	Logger    *slog.Logger
	Metrics   *Metrics
	// Facts asks each finding's owner (Slurm, the API server) for the
	// attributes the policy matches, once per cycle. Nil: every fact is
	// missing, so no tier that needs one acts.
	Facts FactResolver
	// Guard checks leadership right before each act (nil: a sole
	// analyzer); Daemon sets it to its own.
	Guard *leader.Guard
	// reconciledAt is the cycle time of the last reconcile, so that a
	// cycle reconciles once whoever calls it first.
	reconciledAt time.Time
	// SlurmCluster is the local Slurm's cluster name (--slurm.cluster),
	// which a finding's cluster label must name; "" when not given.
	SlurmCluster string
}

// FactResolver looks up the facts of a cycle's findings (facts.Resolver).
type FactResolver interface {
	Resolve(ctx context.Context, fs []finding.Finding) []*facts.Facts
}

// CycleResult summarises one escalation cycle.
type CycleResult struct {
	Findings, Unknown, Exempt, Steps, RateLimited int
	// MissingFacts counts findings whose tier or exemption could not be
	// decided because a fact was missing (at most notified).
	MissingFacts int
	// Unproven counts findings whose target the scheduler's facts showed
	// to be another workload: no step at all.
	Unproven int
	// Standby: another analyzer leads; this one did nothing.
	Standby bool
	// Waiting: no analysis step completed since the last cycle, so no
	// finding was judged and every open episode was left as it was.
	Waiting bool
}

func (e *Escalator) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

func (e *Escalator) count(host, step, result string) {
	if e.Metrics != nil {
		e.Metrics.Actions.WithLabelValues(host, step, result).Inc()
	}
}

// Reconcile settles, on every cycle of the leader, the steps left intended:
// first this process's own whose outcome it knows but failed to write (the
// store was restarted mid-step), written as they happened; then every other
// step left intended by a process that stopped between its two writes (an
// older lease generation, a crash). A cancel or kill is checked against its
// target (done if it took effect, failed so a later cycle may run it if it
// did not), a signal is not repeated, and a notification is marked failed
// so that it is sent again. Steps this process has in flight (an end-of-job
// mail being sent) are left alone. Nothing else runs until this succeeds.
func (e *Escalator) Reconcile(ctx context.Context, now time.Time) error {
	if n, err := e.Log.Rewrite(ctx); err != nil {
		return err
	} else if n > 0 {
		e.logger().Warn("wrote the outcomes of steps whose first write failed", "steps", n)
	}
	pending, err := e.Log.Interrupted(ctx)
	if err != nil {
		return err
	}
	for _, rec := range pending {
		state, detail, err := e.settle(ctx, &rec)
		if err != nil {
			return err
		}
		if err := e.Log.Finish(ctx, rec.Key, state, detail, now); err != nil {
			return err
		}
		e.count(rec.Hostname, rec.Step, ResultReconciled)
		e.logger().Warn("reconciled interrupted step", "key", rec.Key, "step", rec.Step, "job", rec.Job, "state", state, "detail", detail)
	}
	e.reconciledAt = now
	return nil
}

// settle decides the outcome of one interrupted step.
func (e *Escalator) settle(ctx context.Context, rec *audit.Record) (audit.State, string, error) {
	var req action.Request
	if err := json.Unmarshal([]byte(cmp.Or(rec.Payload, "{}")), &req); err != nil {
		// A request that cannot be read cannot be checked either: never
		// risk a second cancel, and never let one row stop every cycle.
		return audit.Done, "interrupted; its request is unreadable (" + err.Error() + "), assumed done and not repeated", nil
	}
	switch {
	case rec.DryRun:
		return audit.DryRun, "interrupted dry run; nothing was done", nil
	case rec.Step == action.StepNotify || rec.Step == action.StepWarn:
		// A repeated warning is harmless; a lost one is not.
		return audit.Failed, "interrupted before its outcome was written; will be retried", nil
	}
	act, ok := e.Actuators[rec.Actuator]
	rc, can := act.(action.Reconciler)
	if !ok || !can {
		// Without a way to check, assume it happened: never risk a
		// second cancel.
		return audit.Done, "interrupted; cannot be checked, assumed done and not repeated", nil
	}
	out, why, err := rc.Reconcile(ctx, &req)
	if err != nil {
		return "", "", fmt.Errorf("reconcile %s: %w", rec.Key, err)
	}
	switch out {
	case action.Applied:
		return audit.Done, "reconciled after restart: " + why, nil
	case action.NotApplied:
		return audit.Failed, "reconciled after restart: not applied (" + why + "); will be retried", nil
	}
	return audit.Done, "reconciled after restart: " + why + "; assumed done, not repeated", nil
}

// unknown reports why a finding must not be acted on, or "".
// gapReason is why a finding carried over a data gap is not acted on.
const gapReason = "its allocation has no data at the latest step"

func (e *Escalator) unknown(f *finding.Finding, now time.Time) string {
	switch {
	case !f.Pattern.Valid():
		return "unknown pattern"
	case f.Hostname == "" || f.Job == "":
		return "no allocation identity"
	case f.Evidence[finding.EvidenceUnknown] > 0:
		return gapReason
	case f.End.IsZero() || now.Sub(f.End) > e.Policy.StaleAfter:
		return "evidence older than stale_after"
	case f.End.After(now.Add(time.Minute)):
		return "evidence from the future"
	}
	return ""
}

// Cycle escalates this cycle's findings at now.
func (e *Escalator) Cycle(ctx context.Context, now time.Time, findings []finding.Finding) (CycleResult, error) {
	var res CycleResult
	if e.reconciledAt.IsZero() || !e.reconciledAt.Equal(now) {
		if err := e.Reconcile(ctx, now); err != nil {
			return res, fmt.Errorf("reconcile before acting: %w", err)
		}
	}
	hour, err := e.Log.RealAttemptsSince(ctx, action.StepReclaim, now.Add(-time.Hour))
	if err != nil {
		return res, err
	}
	b := &escalation.Budget{PerCycle: e.Policy.RateLimits.ReclaimsPerCycle, PerHour: e.Policy.RateLimits.ReclaimsPerHour, Hour: hour}
	fs := append([]finding.Finding(nil), findings...)
	// Oldest and most wasteful first: when the rate limit bites, the worst
	// offenders are reclaimed first, deterministically.
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].WastedGPUHours != fs[j].WastedGPUHours {
			return fs[i].WastedGPUHours > fs[j].WastedGPUHours
		}
		return fs[i].Key() < fs[j].Key()
	})
	known := fs[:0]
	for i := range fs {
		f := &fs[i]
		res.Findings++
		if why := e.unknown(f, now); why != "" {
			res.Unknown++
			e.logger().Info("not acting on finding", "key", f.Key(), "reason", why)
			if why == gapReason {
				// Paused, not over: the episode (and the steps already
				// taken in it) carries on when the data is back.
				if err := e.Log.KeepEpisode(ctx, f.Key(), now); err != nil {
					return res, err
				}
			}
			continue
		}
		known = append(known, *f)
	}
	// The owners are asked once for every finding, right before deciding.
	resolver := e.Facts
	if resolver == nil {
		resolver = &facts.Resolver{}
	}
	fas := resolver.Resolve(ctx, known)
	for i := range known {
		if err := e.escalate(ctx, now, &known[i], fas[i], b, &res); err != nil {
			return res, err
		}
	}
	if _, err := e.Log.EndEpisodes(ctx, now); err != nil {
		return res, err
	}
	return res, nil
}

// escalate reads the finding's history once, plans, and carries out the
// plan; an outcome other than the plan assumed (a step skipped, a dry run)
// is written into the history and the rest planned again, and a failed step
// holds back the steps after it.
func (e *Escalator) escalate(ctx context.Context, now time.Time, f *finding.Finding, fa *facts.Facts, b *escalation.Budget, res *CycleResult) error {
	if fa == nil {
		fa = &facts.Facts{Scheduler: facts.SchedulerOf(f)}
		fa.MarkMissing("no facts were looked up")
	}
	proof, ev := e.evaluate(f, fa, now)
	if proof.Verdict == target.Mismatch {
		return e.refuse(ctx, now, f, &proof, res)
	}
	f = owned(f, fa)
	episode, err := e.Log.Observe(ctx, f.Key(), now)
	if err != nil {
		return err
	}
	hist, err := e.history(ctx, f, episode)
	if err != nil {
		return err
	}
	tier := ""
	if ev.Tier != nil {
		tier = ev.Tier.Name
	}
	base := audit.Record{FindingKey: f.Key(), Episode: episode, Scheduler: f.Scheduler, Hostname: f.Hostname,
		Job: f.Job, User: f.User, Team: f.Team, Pattern: string(f.Pattern), Tier: tier}
	switch {
	case ev.Exempt:
		res.Exempt++
	case ev.Missing != "":
		res.MissingFacts++
	}
	in := escalation.Input{Finding: f, Eval: ev, Policy: e.Policy, Episode: episode, History: hist, Now: now,
		Wired: func(n string) bool { return e.Actuators[n] != nil }}
	for {
		in.Budget = *b
		replan := false
		for _, st := range escalation.Plan(in) {
			switch st.Kind {
			case escalation.Defer:
				if st.Reason == escalation.RateLimited {
					res.RateLimited++
					e.count(f.Hostname, string(st.Action), ResultRateLimited)
					e.logger().Warn("reclaim deferred by rate limit", "key", f.Key(), "per_cycle", b.PerCycle, "per_hour", b.PerHour)
				}
				return nil
			case escalation.Note:
				written, err := e.note(ctx, now, base, st.Name, st.Reason)
				if err != nil {
					return err
				}
				hist.Steps[st.Name] = escalation.Past{At: now}
				// Once per episode: the audit holds the note, the log need not repeat it.
				switch {
				case written && st.Name == escalation.NoteFacts && fa.Gone:
					// A job its scheduler has forgotten has ended: routine, not a fault.
					e.logger().Info("job gone: no tier decided, at most notifying", "key", f.Key(), "missing", ev.Missing)
				case written && st.Name == escalation.NoteFacts:
					e.logger().Warn("facts missing: no tier decided, at most notifying", "key", f.Key(), "missing", ev.Missing)
				case written && st.Name == escalation.NoteGaveUp:
					e.logger().Warn("escalation step given up", "key", f.Key(), "step", st.Action, "detail", st.Reason)
				}
			case escalation.Act:
				state, err := e.act(ctx, now, base, f, &proof, &st, b, res)
				if err != nil {
					return err
				}
				if state == audit.Failed {
					return nil // later steps wait for this one
				}
				hist.Steps[st.Name] = escalation.Past{Delivered: state == audit.Done, At: now}
				replan = state != audit.Done
			}
			if replan {
				break
			}
		}
		if !replan {
			return nil
		}
	}
}

// evaluate proves f's target, then applies the policy. The id names a
// candidate; the scheduler's facts must show it is the workload the
// evidence came from before anything, a notification included, goes to
// its owner: on a mismatch the policy is not asked.
func (e *Escalator) evaluate(f *finding.Finding, fa *facts.Facts, now time.Time) (target.Proof, policy.Evaluation) {
	proof := target.Prove(f, fa, e.SlurmCluster)
	if proof.Verdict == target.Mismatch {
		return proof, policy.Evaluation{}
	}
	ev := e.Policy.Evaluate(f, fa, now)
	if proof.Verdict == target.Unknown && ev.Missing == "" {
		// Nothing could be compared: at most notify, whatever the tiers need.
		ev.Missing = proof.Why
	}
	return proof, ev
}

// owned is f with its user and team as its owner (Slurm, the API server)
// says, not as the telemetry carried them: the audit and the messages name
// who owns the job.
func owned(f *finding.Finding, fa *facts.Facts) *finding.Finding {
	o := *f
	for _, c := range []struct {
		a   schema.Attr
		dst *string
	}{{schema.AttrUser, &o.User}, {schema.AttrTeam, &o.Team}} {
		if v, ok, _ := fa.Value(c.a); ok && v != "" {
			*c.dst = v
		}
	}
	return &o
}

// history is what the audit holds of f's episode, read once.
func (e *Escalator) history(ctx context.Context, f *finding.Finding, episode time.Time) (escalation.History, error) {
	own, jobs, err := e.Log.History(ctx, f.Key(), episode, f.Scheduler, f.Job, f.Start)
	if err != nil {
		return escalation.History{}, err
	}
	h := escalation.History{Steps: map[string]escalation.Past{}, JobTaken: map[string]bool{}}
	for _, r := range own {
		at := r.Finished
		if at.IsZero() {
			at = r.Intended
		}
		h.Steps[stepName(r)] = escalation.Past{Failed: r.State == audit.Failed, Delivered: r.State == audit.Done, At: at, Attempts: r.Attempts}
	}
	for _, r := range jobs {
		h.JobTaken[escalation.StepName(policy.StepAction(r.Step), r.DryRun)] = true
	}
	return h, nil
}

// stepName is the last part of r's idempotency key.
func stepName(r audit.Record) string {
	return strings.TrimPrefix(r.Key, audit.Key(r.FindingKey, r.Episode, ""))
}

// act runs one planned step: intended, run through its actuators, finished.
// Leadership is checked right before the intent and again right before the
// actuators run (the store checks the lease generation at both writes):
// a leader paused past its lease stops here.
func (e *Escalator) act(ctx context.Context, now time.Time, base audit.Record, f *finding.Finding, proof *target.Proof, st *escalation.Step, b *escalation.Budget, res *CycleResult) (audit.State, error) {
	key := audit.Key(f.Key(), base.Episode, st.Name)
	var acts []action.Actuator
	for _, n := range st.Actuators {
		if a := e.Actuators[n]; a != nil {
			acts = append(acts, a)
		}
	}
	name := strings.Join(st.Actuators, ",")
	req := action.Request{Step: string(st.Action), Finding: *f, Tier: base.Tier, Signal: st.Signal, DryRun: st.DryRun,
		NextStep: string(st.NextStep), NextStepAt: st.NextStepAt, Target: proof}
	payload, err := json.Marshal(&req)
	if err != nil {
		return "", fmt.Errorf("encode request %s: %w", key, err)
	}
	if err := e.Guard.Check(); err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	rec := base
	rec.Key, rec.Step, rec.Actuator, rec.DryRun, rec.Payload = key, string(st.Action), name, st.DryRun, string(payload)
	rec, ok, err := e.Log.Intend(ctx, rec, now)
	if err != nil || !ok {
		// Settled or in flight elsewhere: not run again.
		return audit.Skipped, err
	}
	if err := e.Guard.Check(); err != nil {
		// Intended, not run: failed, so that whoever leads runs it; if the
		// store refuses even that, the next leader's reconcile settles it.
		ferr := e.Log.Finish(ctx, key, audit.Failed, "not run: "+err.Error(), now)
		return "", errors.Join(fmt.Errorf("%s: %w", key, err), ferr)
	}
	res.Steps++
	req.Attempt = rec.Attempts
	if st.Action == policy.StepReclaim && !st.DryRun {
		b.Spend()
	}
	state, detail := e.run(ctx, &req, st.Action, acts)
	if err := e.Log.Finish(ctx, key, state, detail, now); err != nil {
		return "", err
	}
	e.count(f.Hostname, string(st.Action), string(state))
	e.logger().Info("escalation step", "key", f.Key(), "step", st.Action, "actuator", name, "state", state,
		"dry_run", st.DryRun, "detail", detail)
	return state, nil
}

// refuse settles a finding whose target is another workload: one note per
// episode, which holds the proof, and one log line; no step runs, and no
// message goes to the other workload's owner.
func (e *Escalator) refuse(ctx context.Context, now time.Time, f *finding.Finding, p *target.Proof, res *CycleResult) error {
	res.Unproven++
	episode, err := e.Log.Observe(ctx, f.Key(), now)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(struct {
		Finding *finding.Finding `json:"finding"`
		Target  *target.Proof    `json:"target"`
	}{f, p})
	if err != nil {
		return fmt.Errorf("encode proof of %s: %w", f.Key(), err)
	}
	base := audit.Record{FindingKey: f.Key(), Episode: episode, Scheduler: f.Scheduler, Hostname: f.Hostname,
		Job: f.Job, User: f.User, Team: f.Team, Pattern: string(f.Pattern), Payload: string(payload)}
	written, err := e.note(ctx, now, base, escalation.NoteTarget, p.String())
	if written {
		e.logger().Warn("target not proven: no step taken", "key", f.Key(), "why", p.Why)
	}
	return err
}

// note writes a settled, skipped step so that the audit says why nothing
// was done; its key makes it a one-off per episode. It reports whether the
// note is new.
func (e *Escalator) note(ctx context.Context, now time.Time, base audit.Record, step, why string) (bool, error) {
	rec := base
	rec.Key, rec.Step, rec.Actuator, rec.Detail = audit.Key(base.FindingKey, base.Episode, step), step, "policy", why
	if rec.Payload == "" {
		rec.Payload = "{}"
	}
	if _, ok, err := e.Log.Intend(ctx, rec, now); err != nil || !ok {
		return false, err
	}
	e.count(base.Hostname, step, string(audit.Skipped))
	return true, e.Log.Finish(ctx, rec.Key, audit.Skipped, why, now)
}

// run carries out one step; for dry runs of disruptive steps it only says
// what would have happened. Notifications are delivered in dry-run too,
// marked as such, so that a policy can be rolled out before it acts.
func (e *Escalator) run(ctx context.Context, req *action.Request, a policy.StepAction, acts []action.Actuator) (audit.State, string) {
	if req.DryRun && a.Disruptive() {
		what := "cancel/evict/kill"
		if a == policy.StepCheckpoint {
			what = "send SIG" + req.Signal + " to"
		}
		return audit.DryRun, fmt.Sprintf("dry-run: would %s job %s via %s", what, req.Finding.Job, acts[0].Name())
	}
	var details []string
	failed := 0
	state := audit.Done
	for _, a := range acts {
		if err := e.Guard.Check(); err != nil {
			// Leadership lapsed between two channels: the rest wait.
			failed++
			details = append(details, a.Name()+": not run: "+err.Error())
			continue
		}
		d, err := a.Act(ctx, req)
		switch {
		case err == nil:
			details = append(details, d)
		case action.Moot(err):
			details = append(details, a.Name()+": "+err.Error())
			if len(acts) == 1 {
				state = audit.Skipped
			}
		default:
			failed++
			details = append(details, a.Name()+": "+err.Error())
		}
	}
	if failed == len(acts) {
		state = audit.Failed
	}
	return state, strings.Join(details, "; ")
}
