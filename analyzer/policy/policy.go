// Package policy reads and applies the reclamation policy: which priority
// tier an allocation belongs to, which escalation steps apply to each waste
// pattern and after what delay, who is exempt, whether reclaiming is allowed
// at all, the rate limits, and whether anything is done for real (dry-run is
// the default). It only decides; the daemon escalates and the actuators act.
package policy

import (
	"path"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
)

// StepAction is one escalation step.
type StepAction string

const (
	StepNotify     StepAction = "notify"     // tell the operators (webhook)
	StepWarn       StepAction = "warn"       // tell the owner (Alertmanager, email)
	StepCheckpoint StepAction = "checkpoint" // signal the job to checkpoint
	StepReclaim    StepAction = "reclaim"    // cancel, evict or kill
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
	Kubernetes       Kubernetes
	ProcessGrace     time.Duration
	Channels         Channels
	Tiers            []Tier
	Exemptions       []Exemption
}

// RateLimits bound reclaims (not warnings).
type RateLimits struct {
	ReclaimsPerCycle int
	ReclaimsPerHour  int
}

// Kubernetes says how pods are reclaimed.
type Kubernetes struct {
	Reclaim string
	// DeleteAfterRefusals deletes a pod after this many refused evictions
	// (PodDisruptionBudget); 0 never deletes.
	DeleteAfterRefusals int
}

// Channels configure where notify and warn steps are delivered.
type Channels struct {
	WebhookURL      string
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

// Match selects allocations; every non-empty field must match (one of its
// values, shell globs allowed); an empty Match matches everything.
type Match struct {
	Partitions []string
	QoS        []string
	Accounts   []string
	Namespaces []string
	Labels     map[string]string
}

// Rule is the escalation for one pattern within a tier.
type Rule struct {
	Pattern           finding.Pattern
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
	// Qualifies is false when the finding is below the rule's thresholds;
	// Why says which.
	Qualifies bool
	Why       string
	DryRun    bool
	// ReclaimAllowed combines the tier's and the rule's reclaim switches.
	ReclaimAllowed bool
}

// Finding labels that tiers match on (set by attribution).
const (
	LabelPartition = "partition"
	LabelQoS       = "qos"
	LabelAccount   = "account"
)

// TierFor returns the first tier whose match selects f, or nil.
func (p *Policy) TierFor(f *finding.Finding) *Tier {
	for i := range p.Tiers {
		if p.Tiers[i].Match.matches(f) {
			return &p.Tiers[i]
		}
	}
	return nil
}

// Evaluate applies the policy to f at now.
func (p *Policy) Evaluate(f *finding.Finding, now time.Time) Evaluation {
	ev := Evaluation{DryRun: p.DryRun}
	if exempt, why := p.exempt(f, now); exempt {
		ev.Exempt, ev.ExemptReason = true, why
	}
	ev.Tier = p.TierFor(f)
	if ev.Tier == nil {
		ev.Why = "no tier matches"
		return ev
	}
	if ev.Tier.DryRun != nil {
		ev.DryRun = *ev.Tier.DryRun
	}
	for i := range ev.Tier.Rules {
		if ev.Tier.Rules[i].Pattern == f.Pattern {
			ev.Rule = &ev.Tier.Rules[i]
		}
	}
	if ev.Rule == nil {
		ev.Why = "tier " + ev.Tier.Name + " has no rule for " + string(f.Pattern)
		return ev
	}
	if ev.Rule.DryRun != nil {
		ev.DryRun = *ev.Rule.DryRun
	}
	ev.ReclaimAllowed = ev.Tier.Reclaim && (ev.Rule.Reclaim == nil || *ev.Rule.Reclaim)
	switch {
	case f.WastedGPUHours < ev.Rule.MinWastedGPUHours:
		ev.Why = "wasted GPU-hours below min_wasted_gpu_hours"
	case f.End.Sub(f.Start) < ev.Rule.MinDuration:
		ev.Why = "finding shorter than min_duration"
	case f.Pattern == finding.Overlong && ev.Tier.MaxRunTime > 0 && now.Sub(f.Start) < ev.Tier.MaxRunTime:
		ev.Why = "run time below the tier's max_run_time"
	default:
		ev.Qualifies = true
	}
	return ev
}

func (p *Policy) exempt(f *finding.Finding, now time.Time) (bool, string) {
	if v, ok := f.Labels[ExemptKey]; ok {
		if until, err := time.Parse(time.RFC3339, v); err == nil {
			if now.Before(until) {
				return true, ExemptKey + " until " + v
			}
		} else if v != "false" {
			// Anything but a past time or "false" exempts: a typo in an
			// exemption must not get a job cancelled.
			return true, ExemptKey + "=" + v
		}
	}
	for _, e := range p.Exemptions {
		if !e.Until.IsZero() && !now.Before(e.Until) {
			continue
		}
		if glob(e.User, f.User) && glob(e.Team, f.Team) && glob(e.Job, f.Job) {
			why := "exemption"
			if e.Reason != "" {
				why += ": " + e.Reason
			}
			return true, why
		}
	}
	return false, ""
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
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, err := path.Match(p, value); err == nil && ok {
			return true
		}
	}
	return false
}

func (m *Match) matches(f *finding.Finding) bool {
	account := f.Account
	if account == "" {
		account = f.Labels[LabelAccount]
	}
	if !anyGlob(m.Partitions, f.Labels[LabelPartition]) || !anyGlob(m.QoS, f.Labels[LabelQoS]) ||
		!anyGlob(m.Accounts, account) || !anyGlob(m.Namespaces, f.Namespace) {
		return false
	}
	for k, v := range m.Labels {
		got, ok := f.Labels[k]
		if !ok || !glob(v, got) {
			return false
		}
	}
	return true
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
