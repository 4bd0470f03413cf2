// Package daemon runs the analyzer: on a cron schedule it takes the cycle's
// findings, escalates them under the policy through the actuators, and
// writes every step to the audit log before and after it runs. After a
// restart it first reconciles steps that were interrupted between the two
// writes. It never acts on unknown or stale data, on exempt allocations,
// past the rate limits, or twice.
package daemon

import (
	"github.com/gpuwatch/gpuwatch/schema"

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
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
)

// StepFacts is the audit step that records a decision made without facts.
const StepFacts = "facts"

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
	// reconciled is set once interrupted steps have been settled.
	reconciled bool
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
	// Standby: another analyzer leads; this one did nothing.
	Standby bool
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

// Reconcile settles every step left intended by a crash: a cancel or kill is
// checked against its target (done if it took effect, failed so a later cycle
// may run it if it did not), a signal is not repeated, and a notification is
// marked failed so that it is sent again. Nothing else runs until this
// succeeds.
func (e *Escalator) Reconcile(ctx context.Context, now time.Time) error {
	pending, err := e.Log.Pending(ctx)
	if err != nil {
		return err
	}
	for _, rec := range pending {
		var req action.Request
		if err := json.Unmarshal([]byte(rec.Payload), &req); err != nil {
			return fmt.Errorf("reconcile %s: decode request: %w", rec.Key, err)
		}
		state, detail := audit.Failed, "interrupted before its outcome was written; will be retried"
		switch {
		case rec.DryRun:
			state, detail = audit.DryRun, "interrupted dry run; nothing was done"
		case rec.Step == action.StepNotify || rec.Step == action.StepWarn:
			// A repeated warning is harmless; a lost one is not.
		default:
			act, ok := e.Actuators[rec.Actuator]
			rc, can := act.(action.Reconciler)
			if !ok || !can {
				// Without a way to check, assume it happened: never risk a
				// second cancel.
				state, detail = audit.Done, "interrupted; cannot be checked, assumed done and not repeated"
				break
			}
			out, why, err := rc.Reconcile(ctx, &req)
			if err != nil {
				return fmt.Errorf("reconcile %s: %w", rec.Key, err)
			}
			switch out {
			case action.Applied:
				state, detail = audit.Done, "reconciled after restart: "+why
			case action.NotApplied:
				state, detail = audit.Failed, "reconciled after restart: not applied ("+why+"); will be retried"
			case action.Unknowable:
				state, detail = audit.Done, "reconciled after restart: "+why+"; assumed done, not repeated"
			}
		}
		if err := e.Log.Finish(ctx, rec.Key, state, detail, now); err != nil {
			return err
		}
		e.count(rec.Hostname, rec.Step, ResultReconciled)
		e.logger().Warn("reconciled interrupted step", "key", rec.Key, "step", rec.Step, "job", rec.Job, "state", state, "detail", detail)
	}
	e.reconciled = true
	return nil
}

// unknown reports why a finding must not be acted on, or "".
func (e *Escalator) unknown(f *finding.Finding, now time.Time) string {
	switch {
	case !f.Pattern.Valid():
		return "unknown pattern"
	case f.Hostname == "" || f.Job == "":
		return "no allocation identity"
	case f.End.IsZero() || now.Sub(f.End) > e.Policy.StaleAfter:
		return "evidence older than stale_after"
	case f.End.After(now.Add(time.Minute)):
		return "evidence from the future"
	case f.Evidence["unknown"] > 0 || f.Evidence["stale"] > 0:
		return "evidence marked unknown"
	}
	return ""
}

// target names the actuator that reclaims or signals f.
func target(f *finding.Finding) string {
	switch {
	case f.Pattern == schema.OrphanProcess:
		return "process"
	case f.Scheduler == schema.SchedulerKubernetes || (f.Scheduler == "" && f.Pod != ""):
		return schema.SchedulerKubernetes
	default:
		return schema.SchedulerSlurm
	}
}

// Cycle escalates this cycle's findings at now.
func (e *Escalator) Cycle(ctx context.Context, now time.Time, findings []finding.Finding) (CycleResult, error) {
	var res CycleResult
	if !e.reconciled {
		if err := e.Reconcile(ctx, now); err != nil {
			return res, fmt.Errorf("reconcile before acting: %w", err)
		}
	}
	hour, err := e.Log.RealAttemptsSince(ctx, action.StepReclaim, now.Add(-time.Hour))
	if err != nil {
		return res, err
	}
	b := &budget{perCycle: e.Policy.RateLimits.ReclaimsPerCycle, perHour: e.Policy.RateLimits.ReclaimsPerHour, hour: hour}
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

type budget struct{ perCycle, perHour, cycle, hour int }

func (b *budget) allows() bool { return b.cycle < b.perCycle && b.hour < b.perHour }

func (e *Escalator) escalate(ctx context.Context, now time.Time, f *finding.Finding, fa *facts.Facts, b *budget, res *CycleResult) error {
	if fa == nil {
		fa = &facts.Facts{Scheduler: facts.SchedulerOf(f)}
		fa.MarkMissing("no facts were looked up")
	}
	ev := e.Policy.Evaluate(f, fa, now)
	// Who owns the job, for the audit and the messages, is what its owner
	// says, not what the telemetry carried.
	owned := *f
	for _, c := range []struct {
		a   schema.Attr
		dst *string
	}{{schema.AttrUser, &owned.User}, {schema.AttrTeam, &owned.Team}} {
		if v, ok, _ := fa.Value(c.a); ok && v != "" {
			*c.dst = v
		}
	}
	f = &owned
	episode, err := e.Log.Observe(ctx, f.Key(), now)
	if err != nil {
		return err
	}
	tier := ""
	if ev.Tier != nil {
		tier = ev.Tier.Name
	}
	base := audit.Record{FindingKey: f.Key(), Episode: episode, Scheduler: f.Scheduler, Hostname: f.Hostname,
		Job: f.Job, User: f.User, Team: f.Team, Pattern: string(f.Pattern), Tier: tier}
	if ev.Exempt {
		res.Exempt++
		return e.note(ctx, now, base, "exempt", ev.ExemptReason)
	}
	if ev.Missing != "" {
		res.MissingFacts++
		// Logged once per episode, when the note is first written: the same
		// missing fact on every cycle is one event, already in the audit.
		noted, err := e.noteNew(ctx, now, base, StepFacts, "facts missing, no tier applies (at most notify): "+ev.Missing)
		if err != nil {
			return err
		}
		if noted {
			e.logger().Warn("facts missing: no tier decided, at most notifying", "key", f.Key(), "missing", ev.Missing)
		}
	}
	if ev.Rule == nil || !ev.Qualifies {
		return nil
	}
	steps := ev.Rule.Steps
	// A step is due After the episode began, and never sooner after the
	// previous step than the policy spaces them: when the minimum warning
	// time holds a checkpoint back, the reclaim still leaves the job the
	// time to checkpoint.
	var prevAt time.Time
	var prevAfter time.Duration
	for i, st := range steps {
		due := episode.Add(st.After)
		if !prevAt.IsZero() {
			if d := prevAt.Add(st.After - prevAfter); d.After(due) {
				due = d
			}
		}
		if now.Before(due) {
			return nil // steps are ordered by delay
		}
		key := audit.Key(f.Key(), episode, stepKey(st.Action, ev.DryRun))
		if rec, ok, err := e.Log.Get(ctx, key); err != nil {
			return err
		} else if ok && rec.State != audit.Failed {
			// Settled, or intended and awaiting reconciliation.
			prevAt, prevAfter = rec.Finished, st.After
			if prevAt.IsZero() {
				prevAt = rec.Intended
			}
			continue
		}
		prevAt, prevAfter = now, st.After
		if ev.Missing != "" && st.Action != policy.StepNotify {
			return nil // without the facts, nothing but a notification
		}
		if st.Action == policy.StepReclaim && !ev.ReclaimAllowed {
			if err := e.note(ctx, now, base, string(st.Action), "reclaim not allowed in tier "+tier); err != nil {
				return err
			}
			continue
		}
		if st.Action.Disruptive() {
			ready, err := e.warnedLongEnough(ctx, now, f.Key(), episode, ev.DryRun)
			if err != nil || !ready {
				return err
			}
		}
		if st.Action == policy.StepReclaim && !ev.DryRun && !b.allows() {
			res.RateLimited++
			e.count(f.Hostname, string(st.Action), ResultRateLimited)
			e.logger().Warn("reclaim deferred by rate limit", "key", f.Key(), "per_cycle", b.perCycle, "per_hour", b.perHour)
			return nil
		}
		if st.Action.Disruptive() {
			taken, err := e.Log.JobStepTaken(ctx, f.Scheduler, f.Job, string(st.Action), key, ev.DryRun, f.Start)
			if err != nil {
				return err
			}
			if taken {
				if err := e.note(ctx, now, base, string(st.Action), "already taken for job "+f.Job+" through another host's finding"); err != nil {
					return err
				}
				continue
			}
		}
		name, acts := e.actuators(st, f)
		if len(acts) == 0 {
			if err := e.note(ctx, now, base, string(st.Action), "no actuator configured for "+name); err != nil {
				return err
			}
			continue
		}
		req := action.Request{Step: string(st.Action), Finding: *f, Tier: tier, Signal: st.Signal, DryRun: ev.DryRun}
		for _, next := range steps[i+1:] {
			if next.Action == policy.StepReclaim && !ev.ReclaimAllowed {
				continue // never announce what the tier does not allow
			}
			req.NextStep, req.NextStepAt = string(next.Action), episode.Add(next.After)
			break
		}
		payload, err := json.Marshal(&req)
		if err != nil {
			return fmt.Errorf("encode request %s: %w", key, err)
		}
		rec := base
		rec.Key, rec.Step, rec.Actuator, rec.DryRun, rec.Payload = key, string(st.Action), name, ev.DryRun, string(payload)
		rec, ok, err := e.Log.Intend(ctx, rec, now)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		res.Steps++
		req.Attempt = rec.Attempts
		if st.Action == policy.StepReclaim && !ev.DryRun {
			b.cycle++
			b.hour++
		}
		state, detail := e.run(ctx, &req, st, acts)
		if err := e.Log.Finish(ctx, key, state, detail, now); err != nil {
			return err
		}
		e.count(f.Hostname, string(st.Action), string(state))
		e.logger().Info("escalation step", "key", f.Key(), "step", st.Action, "actuator", name, "state", state,
			"dry_run", ev.DryRun, "detail", detail)
		if state == audit.Failed {
			return nil // later steps wait for this one
		}
	}
	return nil
}

// note writes a settled, skipped step so that the audit says why nothing
// was done; its key makes it a one-off per episode.
func (e *Escalator) note(ctx context.Context, now time.Time, base audit.Record, step, why string) error {
	_, err := e.noteNew(ctx, now, base, step, why)
	return err
}

// noteNew is note, saying whether the record is new this episode.
func (e *Escalator) noteNew(ctx context.Context, now time.Time, base audit.Record, step, why string) (bool, error) {
	rec := base
	rec.Key, rec.Step, rec.Actuator, rec.Detail, rec.Payload = audit.Key(base.FindingKey, base.Episode, step), step, "policy", why, "{}"
	if _, ok, err := e.Log.Intend(ctx, rec, now); err != nil || !ok {
		return false, err
	}
	e.count(base.Hostname, step, string(audit.Skipped))
	return true, e.Log.Finish(ctx, rec.Key, audit.Skipped, why, now)
}

// stepKey names a step in its idempotency key. Dry-run steps have keys of
// their own: when a policy leaves dry-run, an episode in progress sends a
// real warning and waits the minimum warning time again before it acts,
// instead of treating its dry-run steps as done.
func stepKey(a policy.StepAction, dryRun bool) string {
	if dryRun {
		return string(a) + "+dry_run"
	}
	return string(a)
}

// warnedLongEnough: disruptive steps wait until a warning (of the same
// dry-run mode) was delivered at least min_warning ago.
func (e *Escalator) warnedLongEnough(ctx context.Context, now time.Time, fkey string, episode time.Time, dryRun bool) (bool, error) {
	w, ok, err := e.Log.Get(ctx, audit.Key(fkey, episode, stepKey(policy.StepWarn, dryRun)))
	if err != nil || !ok || w.State != audit.Done {
		return false, err
	}
	return !now.Before(w.Finished.Add(e.Policy.MinWarning)), nil
}

func (e *Escalator) actuators(st policy.Step, f *finding.Finding) (string, []action.Actuator) {
	var names []string
	if st.Action == policy.StepNotify || st.Action == policy.StepWarn {
		names = e.Policy.ChannelsFor(st)
	} else {
		names = []string{target(f)}
	}
	var acts []action.Actuator
	for _, n := range names {
		if a, ok := e.Actuators[n]; ok && a != nil {
			acts = append(acts, a)
		}
	}
	if len(names) == 0 {
		return "a channel", nil
	}
	return strings.Join(names, ","), acts
}

// run carries out one step; for dry runs of disruptive steps it only says
// what would have happened. Notifications are delivered in dry-run too,
// marked as such, so that a policy can be rolled out before it acts.
func (e *Escalator) run(ctx context.Context, req *action.Request, st policy.Step, acts []action.Actuator) (audit.State, string) {
	if req.DryRun && st.Action.Disruptive() {
		what := "cancel/evict/kill"
		if st.Action == policy.StepCheckpoint {
			what = "send SIG" + req.Signal + " to"
		}
		return audit.DryRun, fmt.Sprintf("dry-run: would %s job %s via %s", what, req.Finding.Job, acts[0].Name())
	}
	var details []string
	failed := 0
	state := audit.Done
	for _, a := range acts {
		d, err := a.Act(ctx, req)
		switch {
		case err == nil:
			details = append(details, d)
		case errors.Is(err, action.ErrGone), errors.Is(err, action.ErrUnsupported), errors.Is(err, action.ErrInvalid), errors.Is(err, action.ErrRefused):
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
