package policy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// LoadFile reads and validates a policy file.
func LoadFile(name string) (*Policy, error) {
	// Bounded, and a FIFO or device is refused instead of read forever.
	data, err := configfile.ReadFile(name)
	if err != nil {
		return nil, configfile.Errors{{File: name, Msg: fmt.Sprintf("read policy: %v", err)}}
	}
	return ParseFile(name, data)
}

// Parse validates a policy document that has no file name; its errors name
// it "policy".
func Parse(data []byte) (*Policy, error) { return ParseFile("policy", data) }

// ParseFile validates a policy document read from name through
// internal/configfile: one document, known keys only, no NaN or infinity,
// every value checked by its field's type as it is decoded over
// defaultFile, then the rules that join keys. Every problem is returned
// (configfile.Errors), each as "file:line: key.path: problem".
func ParseFile(name string, data []byte) (*Policy, error) {
	f := defaultFile()
	doc, err := configfile.Decode(name, data, &f)
	if err != nil {
		return nil, err
	}
	if doc.Root == nil {
		return nil, configfile.Errors{{File: name, Msg: "empty policy: at least one tier is required"}}
	}
	c := &checker{doc: doc}
	p := c.policy(&f)
	if err := c.errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// checker holds the rules that no single field can: sections that need
// one another, order, uniqueness, and what a step may do.
type checker struct {
	doc  *configfile.Doc
	errs configfile.Errors
}

func (c *checker) fail(key, format string, args ...any) {
	c.errs = append(c.errs, c.doc.Errorf(key, format, args...))
}

func (c *checker) policy(f *policyFile) *Policy {
	p := &Policy{
		DryRun:           f.DryRun,
		MinWarning:       f.MinWarning.D(),
		StaleAfter:       f.StaleAfter.D(),
		CheckpointSignal: string(f.CheckpointSignal),
		RateLimits: RateLimits{ReclaimsPerCycle: int(f.RateLimits.ReclaimsPerCycle),
			ReclaimsPerHour: int(f.RateLimits.ReclaimsPerHour)},
		Retry: Retry{InitialBackoff: f.Retry.InitialBackoff.D(), MaxBackoff: f.Retry.MaxBackoff.D(),
			MaxAttempts: int(f.Retry.MaxAttempts)},
		Kubernetes: Kubernetes{Reclaim: string(f.Kubernetes.Reclaim),
			DeleteAfterRefusals: int(f.Kubernetes.DeleteAfterRefusals),
			JupyterHubFallback:  string(f.Kubernetes.JupyterHubFallback)},
		OutOfService: c.outOfService(&f.OutOfService, f.DryRun),
		ProcessGrace: f.Process.Grace.D(),
		Channels:     c.channels(&f.Channels),
		Exemptions:   c.exemptions(f.Exemptions),
		Trust:        Trust(f.TrustWorkloadKeys),
	}
	if p.Retry.MaxBackoff < p.Retry.InitialBackoff {
		c.fail("retry.max_backoff", "must be at least retry.initial_backoff (%s)", f.Retry.InitialBackoff)
	}
	if len(f.Tiers) == 0 {
		c.fail("tiers", "at least one tier is required")
	}
	names := map[tierName]bool{}
	for i := range f.Tiers {
		key := fmt.Sprintf("tiers[%d]", i)
		if names[f.Tiers[i].Name] {
			c.fail(key+".name", "duplicate tier %q", f.Tiers[i].Name)
		}
		names[f.Tiers[i].Name] = true
		p.Tiers = append(p.Tiers, c.tier(key, &f.Tiers[i], p))
	}
	return p
}

func (c *checker) outOfService(f *outOfServiceFile, dryRun bool) OutOfService {
	o := OutOfService{Enabled: f.Enabled, DryRun: dryRun, Faults: int(f.Faults), Window: f.Window.D(),
		OnRowRemapFailure: f.OnRowRemapFailure, ExemptNodes: configfile.Globs(f.ExemptNodes)}
	if f.DryRun != nil {
		o.DryRun = *f.DryRun
	}
	if o.Faults == 0 {
		c.fail("out_of_service.faults", "must be at least 1")
	}
	return o
}

func (c *checker) channels(f *channelsFile) Channels {
	ch := Channels{AlertDuration: DefaultAlertDuration}
	if w := f.Webhook; w != nil {
		ch.WebhookURL, ch.WebhookFormat = string(w.URL), string(w.Format)
		if w.URL == "" {
			c.fail("channels.webhook", "needs a url")
		}
	}
	if a := f.Alertmanager; a != nil {
		ch.AlertmanagerURL = strings.TrimSuffix(string(a.URL), "/")
		if a.URL == "" {
			c.fail("channels.alertmanager", "needs a url")
		}
		if a.AlertDuration != 0 {
			ch.AlertDuration = a.AlertDuration.D()
		}
	}
	if e := f.Email; e != nil {
		if e.Domain == "" && len(e.To) == 0 {
			c.fail("channels.email", "needs a domain or recipients (to)")
		}
		ch.EmailDomain = string(e.Domain)
		for _, a := range e.To {
			ch.EmailTo = append(ch.EmailTo, string(a))
		}
	}
	return ch
}

// exemptions: each names whom it exempts, by glob, and may end at a time.
func (c *checker) exemptions(fs []exemptionFile) []Exemption {
	var out []Exemption
	for i, e := range fs {
		if e.User == "" && e.Team == "" && e.Job == "" {
			c.fail(fmt.Sprintf("exemptions[%d]", i), "an exemption needs a user, team or job")
		}
		x := Exemption{User: string(e.User), Team: string(e.Team), Job: string(e.Job), Reason: e.Reason}
		if e.Until != nil {
			x.Until = e.Until.T()
		}
		out = append(out, x)
	}
	return out
}

func (c *checker) tier(key string, f *tierFile, p *Policy) Tier {
	t := Tier{Name: string(f.Name), Reclaim: f.Reclaim, DryRun: f.DryRun, MaxRunTime: f.MaxRunTime.D(),
		Match: c.match(key+".match", f.Match)}
	c.untrusted(key+".match", t.Match, p.Trust)
	if f.Name == "" {
		c.fail(key+".name", "a tier needs a name")
	}
	seen := map[pattern]bool{}
	for i := range f.Rules {
		rk := fmt.Sprintf("%s.rules[%d]", key, i)
		if seen[f.Rules[i].Pattern] {
			c.fail(rk+".pattern", "duplicate rule for pattern %q in tier %q", f.Rules[i].Pattern, f.Name)
		}
		seen[f.Rules[i].Pattern] = true
		t.Rules = append(t.Rules, c.rule(rk, &f.Rules[i], p))
	}
	return t
}

// match checks each key against the attributes the analyzer can supply: a
// key that nothing fills would never match, and a tier that never matches
// lets its findings fall through to a later, possibly harsher, tier.
func (c *checker) match(key string, f matchFile) Match {
	m := Match{}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n, kk := f[k], key+"."+k
		spec, ok := schema.AttrByMatchKey(k)
		switch {
		case !ok:
			c.fail(kk, "unknown match key %q: nothing fills it (one of %s)", k, strings.Join(schema.MatchKeys(), ", "))
		case spec.Map:
			var mv map[string]string
			if err := n.Decode(&mv); err != nil || len(mv) == 0 {
				c.fail(kk, "want a non-empty map of name: pattern")
				continue
			}
			for name, g := range mv {
				if name == "" {
					c.fail(kk, "empty name")
				}
				c.glob(kk+"."+name, g)
			}
			if m.Maps == nil {
				m.Maps = map[schema.Attr]map[string]string{}
			}
			m.Maps[spec.Attr] = mv
		default:
			var lv []string
			if err := n.Decode(&lv); err != nil || len(lv) == 0 {
				c.fail(kk, "want a non-empty list of patterns")
				continue
			}
			for i, g := range lv {
				c.glob(fmt.Sprintf("%s[%d]", kk, i), g)
			}
			if m.Values == nil {
				m.Values = map[schema.Attr][]string{}
			}
			m.Values[spec.Attr] = lv
		}
	}
	return m
}

func (c *checker) glob(key, g string) {
	if !configfile.ValidGlob(g) {
		c.fail(key, "invalid pattern %q", g)
	}
}

func (c *checker) rule(key string, f *ruleFile, p *Policy) Rule {
	rule := Rule{Pattern: schema.Pattern(f.Pattern), DryRun: f.DryRun, Reclaim: f.Reclaim,
		MinWastedGPUHours: float64(f.MinWastedGPUHours), MinDuration: f.MinDuration.D()}
	if f.Pattern == "" {
		c.fail(key+".pattern", "a rule needs a pattern")
	}
	if len(f.Steps) == 0 {
		c.fail(key+".steps", "a rule needs at least one step")
	}
	seen := map[StepAction]bool{}
	var last time.Duration
	for i := range f.Steps {
		sk := fmt.Sprintf("%s.steps[%d]", key, i)
		st := c.step(sk, &f.Steps[i], rule.Pattern, seen, p)
		if st.After < last {
			c.fail(sk+".after", "steps must be in order of their delay (%s is before the previous step's %s)", f.Steps[i].After, configfile.Delay(last))
		}
		last = st.After
		rule.Steps = append(rule.Steps, st)
	}
	return rule
}

// step checks one step against the rule's earlier steps (seen, which it
// extends) and the policy's channels.
func (c *checker) step(key string, f *stepFile, pat schema.Pattern, seen map[StepAction]bool, p *Policy) Step {
	st := Step{Action: f.Action, After: f.After.D(), Signal: string(f.Signal)}
	switch {
	case f.Action == "":
		c.fail(key+".action", "a step needs an action (one of notify, warn, checkpoint, reclaim)")
	case seen[f.Action]:
		c.fail(key+".action", "action %q appears twice in one rule", f.Action)
	case f.Action.Disruptive() && pat.Health():
		c.fail(key+".action", "pattern %s is a health finding (the job was slowed or ended by its GPU, not wasteful): only notify and warn steps apply", pat)
	case f.Action.Disruptive() && !seen[StepWarn]:
		// The minimum warning time runs from a delivered warning.
		c.fail(key+".action", "a %s step needs an earlier warn step in the same rule", f.Action)
	}
	seen[f.Action] = true
	if f.Signal != "" && f.Action != StepCheckpoint {
		c.fail(key+".signal", "only a checkpoint step sends a signal")
	}
	if f.Action == StepCheckpoint && st.Signal == "" {
		st.Signal = p.CheckpointSignal
	}
	if len(f.Channels) > 0 && f.Action != StepNotify && f.Action != StepWarn {
		c.fail(key+".channels", "only notify and warn steps have channels")
	}
	for j, ch := range f.Channels {
		if !p.Channels.Configured(string(ch)) {
			c.fail(fmt.Sprintf("%s.channels[%d]", key, j), "channel %q is not configured under channels", ch)
		}
		st.Channels = append(st.Channels, string(ch))
	}
	return st
}
