// Package policy reads and applies the reclamation policy: which priority
// tier an allocation belongs to, which escalation steps apply to each waste
// pattern and after what delay, who is exempt, whether reclaiming is allowed
// at all, the rate limits, and whether anything is done for real (dry-run is
// the default). It only decides; the daemon escalates and the actuators act.
package policy

import (
	"path"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// StepAction is one escalation step.
type StepAction string

const (
	StepNotify     StepAction = StepAction(schema.ActionNotify)     // tell the operators (webhook)
	StepWarn       StepAction = StepAction(schema.ActionWarn)       // tell the owner (Alertmanager, email)
	StepCheckpoint StepAction = StepAction(schema.ActionCheckpoint) // signal the job to checkpoint
	StepReclaim    StepAction = StepAction(schema.ActionReclaim)    // cancel, evict or kill
)

// StepActions lists the steps in escalation order.
var StepActions = []StepAction{StepNotify, StepWarn, StepCheckpoint, StepReclaim}

// Disruptive reports whether a step can end or disturb a running job; such
// steps wait for the minimum warning time and count against rate limits only
// when they reclaim.
func (a StepAction) Disruptive() bool { return a == StepCheckpoint || a == StepReclaim }

// Channel names for notify and warn steps.
const (
	ChannelWebhook      = "webhook"
	ChannelAlertmanager = "alertmanager"
	ChannelEmail        = "email"
)

// Kubernetes reclaim modes.
const (
	KubeEvict      = "evict"       // Eviction API: PodDisruptionBudgets hold
	KubeScaleOwner = "scale_owner" // scale the owning Deployment/StatefulSet to zero
	KubeDelete     = "delete"      // delete the pod (last resort)
)

// Policy is a validated policy file.
type Policy struct {
	DryRun           bool
	MinWarning       time.Duration
	StaleAfter       time.Duration
	CheckpointSignal string
	RateLimits       RateLimits
	Retry            Retry
	Kubernetes       Kubernetes
	OutOfService     OutOfService
	ProcessGrace     time.Duration
	Channels         Channels
	Tiers            []Tier
	Exemptions       []Exemption
	// Trust is what the workload may decide (trust_workload_keys): no tier
	// matches an untrusted workload-owned key (the parser refuses it), and
	// gpuwatch.io/exempt exempts only where it is trusted.
	Trust Trust
}

// RateLimits bound reclaims (not warnings).
type RateLimits struct {
	ReclaimsPerCycle int
	ReclaimsPerHour  int
}

// Retry says when a failed step runs again.
type Retry struct {
	InitialBackoff, MaxBackoff time.Duration
	// MaxAttempts is the number of attempts after which a failing step is
	// given up for its episode; 0 never gives up.
	MaxAttempts int
}

// Backoff is the least time after a step's attempts-th failed attempt
// before it runs again: InitialBackoff, doubled per further attempt, at
// most MaxBackoff.
func (r Retry) Backoff(attempts int) time.Duration {
	d := r.InitialBackoff
	for i := 1; i < attempts && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// GivesUp reports whether a step that failed attempts times is given up.
func (r Retry) GivesUp(attempts int) bool { return r.MaxAttempts > 0 && attempts >= r.MaxAttempts }

// OutOfService says when a node whose GPUs keep faulting is taken out of
// service: drained in Slurm (running jobs finish, no new one starts),
// cordoned in Kubernetes (running pods stay, no new one is scheduled).
// An operator undoes it (scontrol update State=RESUME, kubectl uncordon);
// the analyzer never undoes it and never repeats it for the faults it
// already acted on.
type OutOfService struct {
	// Enabled is false by default: nothing is drained unless a policy says so.
	Enabled bool
	// DryRun records what would be drained without draining; it defaults
	// to the policy's dry_run.
	DryRun bool
	// Faults is how many hardware faults (hardware XIDs, uncorrectable ECC
	// errors, row-remap failures; never an application's XID nor the
	// driver's) on one node's GPUs within Window take it out.
	Faults int
	Window time.Duration
	// OnRowRemapFailure takes a node out at its first row-remap failure:
	// the GPU has no spare rows left and needs a reset or replacement.
	OnRowRemapFailure bool
	// ExemptNodes are host name globs never taken out (canaries, nodes
	// under repair that an operator watches).
	ExemptNodes []string
}

// Exempt reports whether host is never taken out of service.
func (o OutOfService) Exempt(host string) bool {
	for _, g := range o.ExemptNodes {
		if ok, _ := path.Match(g, host); ok {
			return true
		}
	}
	return false
}

// Kubernetes says how pods are reclaimed.
type Kubernetes struct {
	Reclaim string
	// DeleteAfterRefusals deletes a pod after this many refused evictions
	// (PodDisruptionBudget); 0 never deletes.
	DeleteAfterRefusals int
	// JupyterHubFallback says what to do with an idle notebook whose server
	// the Hub could not stop: HubFallbackNone (the step fails and is
	// retried) or HubFallbackEvict (reclaim the pod as above).
	JupyterHubFallback string
}

// Values of kubernetes.jupyterhub_fallback.
const (
	HubFallbackNone  = "none"
	HubFallbackEvict = "evict"
)

// Channels configure where notify and warn steps are delivered.
type Channels struct {
	WebhookURL string
	// WebhookFormat is the body the webhook receives: gpuwatch's JSON
	// (empty), or a chat service's incoming-webhook body
	// (action.WebhookFormats).
	WebhookFormat   string
	AlertmanagerURL string
	AlertDuration   time.Duration
	// EmailDomain, when set, mails the allocation's user at user@EmailDomain.
	EmailDomain string
	// EmailTo are extra recipients of every email.
	EmailTo []string
}

// Configured reports whether a channel has a destination.
func (c Channels) Configured(name string) bool {
	switch name {
	case ChannelWebhook:
		return c.WebhookURL != ""
	case ChannelAlertmanager:
		return c.AlertmanagerURL != ""
	case ChannelEmail:
		return c.EmailDomain != "" || len(c.EmailTo) > 0
	}
	return false
}

// Tier is a priority tier.
type Tier struct {
	Name       string
	Match      Match
	Reclaim    bool
	DryRun     *bool
	MaxRunTime time.Duration
	Rules      []Rule
}

// Match selects allocations by the facts their owner reports now (see
// package facts for the attributes). Every listed attribute must match: a
// scalar one when its value matches one of the globs, a map one when every
// listed key is present with a value matching its glob. An empty Match
// matches everything.
type Match struct {
	Values map[schema.Attr][]string
	Maps   map[schema.Attr]map[string]string
}

// Empty reports whether m matches everything (a catch-all tier).
func (m *Match) Empty() bool { return len(m.Values) == 0 && len(m.Maps) == 0 }

// Rule is the escalation for one pattern within a tier.
type Rule struct {
	Pattern           schema.Pattern
	DryRun            *bool
	Reclaim           *bool
	MinWastedGPUHours float64
	MinDuration       time.Duration
	Steps             []Step
}

// Step is one escalation step, due After the finding was first seen.
type Step struct {
	Action   StepAction
	After    time.Duration
	Signal   string   // checkpoint only
	Channels []string // notify and warn only; empty: DefaultChannels
}

// Exemption exempts allocations of a user, team or job (globs allowed),
// optionally until a time.
type Exemption struct {
	User, Team, Job string
	Until           time.Time
	Reason          string
}

// Evaluation is what the policy says about one finding.
type Evaluation struct {
	Tier *Tier
	Rule *Rule
	// Exempt findings get no step at all.
	Exempt       bool
	ExemptReason string
	// Missing names the facts the decision needed and could not have, and
	// why. The finding then matches no tier: Rule holds only the notify
	// steps of the tier that could not be decided, Tier is nil, and
	// nothing disruptive runs. A missing fact never lets a finding fall
	// through to a later tier.
	Missing string
	// Qualifies is false when the finding is below the rule's thresholds;
	// Why says which.
	Qualifies bool
	Why       string
	DryRun    bool
	// ReclaimAllowed combines the tier's and the rule's reclaim switches.
	ReclaimAllowed bool
}

// tierFor returns the first tier whose match selects the facts; or, when a
// tier cannot be decided because a fact it needs is missing, that tier and
// why: the search stops there.
func (p *Policy) tierFor(fa *facts.Facts) (*Tier, string) {
	for i := range p.Tiers {
		ok, missing := p.Tiers[i].Match.matches(fa)
		if missing != "" {
			return &p.Tiers[i], missing
		}
		if ok {
			return &p.Tiers[i], ""
		}
	}
	return nil, ""
}

// Evaluate applies the policy to f, whose owner reported fa, at now.
func (p *Policy) Evaluate(f *finding.Finding, fa *facts.Facts, now time.Time) Evaluation {
	ev := Evaluation{DryRun: p.DryRun}
	if fa == nil {
		fa = &facts.Facts{Scheduler: facts.SchedulerOf(f)}
		fa.MarkMissing("no facts were looked up")
	}
	exempt, why, missingEx := p.exempt(f, fa, now)
	if exempt {
		ev.Exempt, ev.ExemptReason = true, why
	}
	tier, missing := p.tierFor(fa)
	if !exempt && missingEx != "" {
		// An exemption that cannot be decided protects like one that holds,
		// except that the operators are told.
		if missing != "" {
			missing += "; "
		}
		missing += "exemption " + missingEx
	}
	if missing != "" {
		ev.Missing = missing
		ev.Why = "facts missing: " + missing
		if tier == nil {
			return ev
		}
		if r := tier.rule(f.Pattern); r != nil {
			notify := *r
			notify.Steps = nil
			for _, st := range r.Steps {
				if st.Action == StepNotify {
					notify.Steps = append(notify.Steps, st)
				}
			}
			if len(notify.Steps) > 0 {
				ev.Rule, ev.Qualifies = &notify, p.qualifies(f, tier, &notify, now) == ""
			}
		}
		return ev
	}
	ev.Tier = tier
	if ev.Tier == nil {
		ev.Why = "no tier matches"
		return ev
	}
	if ev.Tier.DryRun != nil {
		ev.DryRun = *ev.Tier.DryRun
	}
	ev.Rule = ev.Tier.rule(f.Pattern)
	if ev.Rule == nil {
		ev.Why = "tier " + ev.Tier.Name + " has no rule for " + string(f.Pattern)
		return ev
	}
	if ev.Rule.DryRun != nil {
		ev.DryRun = *ev.Rule.DryRun
	}
	ev.ReclaimAllowed = ev.Tier.Reclaim && (ev.Rule.Reclaim == nil || *ev.Rule.Reclaim)
	if f.Pattern.Health() {
		// A job slowed or ended by its GPU is never disturbed for it,
		// whatever the rule says: only its notify and warn steps apply.
		ev.Rule, ev.ReclaimAllowed = withoutDisruptive(ev.Rule), false
	}
	ev.Why = p.qualifies(f, ev.Tier, ev.Rule, now)
	ev.Qualifies = ev.Why == ""
	return ev
}

// withoutDisruptive is a copy of r with its checkpoint and reclaim steps
// left out.
func withoutDisruptive(r *Rule) *Rule {
	c := *r
	c.Steps = nil
	for _, st := range r.Steps {
		if !st.Action.Disruptive() {
			c.Steps = append(c.Steps, st)
		}
	}
	return &c
}

func (t *Tier) rule(pat schema.Pattern) *Rule {
	for i := range t.Rules {
		if t.Rules[i].Pattern == pat {
			return &t.Rules[i]
		}
	}
	return nil
}

// qualifies returns why f is below the rule's thresholds, or "".
func (p *Policy) qualifies(f *finding.Finding, t *Tier, r *Rule, now time.Time) string {
	switch {
	case f.WastedGPUHours < r.MinWastedGPUHours:
		return "wasted GPU-hours below min_wasted_gpu_hours"
	case f.End.Sub(f.Start) < r.MinDuration:
		return "finding shorter than min_duration"
	case f.Pattern == schema.Overlong && t.MaxRunTime > 0 && now.Sub(f.Start) < t.MaxRunTime:
		return "run time below the tier's max_run_time"
	}
	return ""
}

// exempt says whether f is exempt; missing names a fact an exemption needed
// and could not have (then it is not known to be exempt). The pod's own
// gpuwatch.io/exempt counts only where the operator trusts it: its author
// wrote it, and without trust it neither exempts nor is needed.
func (p *Policy) exempt(f *finding.Finding, fa *facts.Facts, now time.Time) (bool, string, string) {
	var missing []string
	for _, a := range p.Trust.SelfExemption() {
		m, _, why := fa.Map(a)
		if why != "" {
			missing = append(missing, string(a)+": "+why)
			continue
		}
		v, ok := m[schema.ExemptKey]
		if !ok {
			continue
		}
		if until, err := time.Parse(time.RFC3339, v); err == nil {
			if now.Before(until) {
				return true, schema.ExemptKey + " until " + v, ""
			}
		} else if v != "false" {
			// Anything but a past time or "false" exempts: a typo in an
			// exemption must not get a job cancelled.
			return true, schema.ExemptKey + "=" + v, ""
		}
	}
	for _, e := range p.Exemptions {
		if !e.Until.IsZero() && !now.Before(e.Until) {
			continue
		}
		ok, why := e.matches(f, fa)
		if why != "" {
			missing = append(missing, why)
			continue
		}
		if ok {
			reason := "exemption"
			if e.Reason != "" {
				reason += ": " + e.Reason
			}
			return true, reason, ""
		}
	}
	return false, "", strings.Join(missing, "; ")
}

// matches reports whether the exemption selects f, or which fact it lacks.
func (e *Exemption) matches(f *finding.Finding, fa *facts.Facts) (bool, string) {
	if !glob(e.Job, f.Job) {
		return false, ""
	}
	var missing []string
	for _, c := range []struct {
		a       schema.Attr
		pattern string
	}{{schema.AttrUser, e.User}, {schema.AttrTeam, e.Team}} {
		if c.pattern == "" {
			continue
		}
		v, ok, why := fa.Value(c.a)
		switch {
		case why != "":
			missing = append(missing, string(c.a)+": "+why)
		case !ok || !glob(c.pattern, v):
			return false, ""
		}
	}
	if len(missing) > 0 {
		return false, strings.Join(missing, "; ")
	}
	return true, ""
}

// glob matches value against pattern; an empty pattern matches anything.
func glob(pattern, value string) bool {
	if pattern == "" {
		return true
	}
	ok, err := path.Match(pattern, value)
	return err == nil && ok
}

func anyGlob(patterns []string, value string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(p, value); err == nil && ok {
			return true
		}
	}
	return false
}

// matches decides the match on the facts: false as soon as a known fact
// does not match; else, when a fact it needs is missing, which and why.
func (m *Match) matches(fa *facts.Facts) (bool, string) {
	var missing []string
	for _, s := range schema.MatchAttrs() {
		if globs, ok := m.Values[s.Attr]; ok {
			v, have, why := fa.Value(s.Attr)
			switch {
			case why != "":
				missing = append(missing, string(s.Attr)+": "+why)
			case !have || !anyGlob(globs, v):
				return false, ""
			}
		}
		if want, ok := m.Maps[s.Attr]; ok {
			got, have, why := fa.Map(s.Attr)
			if why != "" {
				missing = append(missing, string(s.Attr)+": "+why)
				continue
			}
			if !have {
				return false, ""
			}
			for k, g := range want {
				v, ok := got[k]
				if !ok || !glob(g, v) {
					return false, ""
				}
			}
		}
	}
	if len(missing) > 0 {
		return false, strings.Join(missing, "; ")
	}
	return true, ""
}

// ChannelsFor returns the configured channels a notify or warn step goes to:
// the step's own, else the configured ones of DefaultChannels, else every
// configured channel (a warning must reach someone before any reclaim).
func (p *Policy) ChannelsFor(s Step) []string {
	if len(s.Channels) > 0 {
		return configured(p.Channels, s.Channels)
	}
	if out := configured(p.Channels, DefaultChannels[s.Action]); len(out) > 0 {
		return out
	}
	return configured(p.Channels, []string{ChannelAlertmanager, ChannelEmail, ChannelWebhook})
}

func configured(c Channels, names []string) []string {
	var out []string
	for _, n := range names {
		if c.Configured(n) {
			out = append(out, n)
		}
	}
	return out
}
