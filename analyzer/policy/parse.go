package policy

import (
	"github.com/gpuwatch/gpuwatch/schema"

	"fmt"
	"math"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// The raw structs mirror the file; strings stand for durations and times so
// that a bad value is reported by key and line rather than by Go type.
type rawPolicy struct {
	DryRun           *bool          `yaml:"dry_run"`
	MinWarning       string         `yaml:"min_warning"`
	StaleAfter       string         `yaml:"stale_after"`
	CheckpointSignal string         `yaml:"checkpoint_signal"`
	RateLimits       *rawRate       `yaml:"rate_limits"`
	Retry            *rawRetry      `yaml:"retry"`
	Kubernetes       *rawKube       `yaml:"kubernetes"`
	OutOfService     *rawOutOfSvc   `yaml:"out_of_service"`
	Process          *rawProcess    `yaml:"process"`
	Channels         *rawChannels   `yaml:"channels"`
	Tiers            []rawTier      `yaml:"tiers"`
	Exemptions       []rawExemption `yaml:"exemptions"`
}

type rawRate struct {
	ReclaimsPerCycle *int `yaml:"reclaims_per_cycle"`
	ReclaimsPerHour  *int `yaml:"reclaims_per_hour"`
}

type rawRetry struct {
	InitialBackoff string `yaml:"initial_backoff"`
	MaxBackoff     string `yaml:"max_backoff"`
	MaxAttempts    *int   `yaml:"max_attempts"`
}

type rawKube struct {
	Reclaim             string `yaml:"reclaim"`
	DeleteAfterRefusals *int   `yaml:"delete_after_refusals"`
	JupyterHubFallback  string `yaml:"jupyterhub_fallback"`
}

type rawOutOfSvc struct {
	Enabled           bool     `yaml:"enabled"`
	DryRun            *bool    `yaml:"dry_run"`
	Faults            *int     `yaml:"faults"`
	Window            string   `yaml:"window"`
	OnRowRemapFailure *bool    `yaml:"on_row_remap_failure"`
	ExemptNodes       []string `yaml:"exempt_nodes"`
}

type rawProcess struct {
	Grace string `yaml:"grace"`
}

type rawChannels struct {
	Webhook *struct {
		URL    string `yaml:"url"`
		Format string `yaml:"format"`
	} `yaml:"webhook"`
	Alertmanager *struct {
		URL           string `yaml:"url"`
		AlertDuration string `yaml:"alert_duration"`
	} `yaml:"alertmanager"`
	Email *struct {
		Domain string   `yaml:"domain"`
		To     []string `yaml:"to"`
	} `yaml:"email"`
}

type rawTier struct {
	Name       string    `yaml:"name"`
	Match      rawMatch  `yaml:"match"`
	Reclaim    *bool     `yaml:"reclaim"`
	DryRun     *bool     `yaml:"dry_run"`
	MaxRunTime string    `yaml:"max_run_time"`
	Rules      []rawRule `yaml:"rules"`
}

// rawMatch is checked key by key against the attributes facts can supply.
type rawMatch map[string]yaml.Node

type rawRule struct {
	Pattern           string    `yaml:"pattern"`
	DryRun            *bool     `yaml:"dry_run"`
	Reclaim           *bool     `yaml:"reclaim"`
	MinWastedGPUHours *float64  `yaml:"min_wasted_gpu_hours"`
	MinDuration       string    `yaml:"min_duration"`
	Steps             []rawStep `yaml:"steps"`
}

type rawStep struct {
	Action   string   `yaml:"action"`
	After    string   `yaml:"after"`
	Signal   string   `yaml:"signal"`
	Channels []string `yaml:"channels"`
}

type rawExemption struct {
	User   string `yaml:"user"`
	Team   string `yaml:"team"`
	Job    string `yaml:"job"`
	Until  string `yaml:"until"`
	Reason string `yaml:"reason"`
}

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
// internal/configfile: one document, known keys only, no NaN or infinity.
// Every problem is returned (configfile.Errors), each as
// "file:line: key.path: problem".
func ParseFile(name string, data []byte) (*Policy, error) {
	var raw rawPolicy
	doc, err := configfile.Decode(name, data, &raw)
	if err != nil {
		return nil, err
	}
	if doc.Root == nil {
		return nil, configfile.Errors{{File: name, Msg: "empty policy: at least one tier is required"}}
	}
	v := &validator{doc: doc}
	p := v.policy(&raw)
	if err := v.errs.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

type validator struct {
	doc  *configfile.Doc
	errs configfile.Errors
}

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, v.doc.Errorf(key, format, args...))
}

func (v *validator) duration(key, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	if strings.HasPrefix(strings.TrimSpace(s), "-") {
		v.fail(key, "duration %q must not be negative", s)
		return def
	}
	// gpuwatch's one duration syntax, shared by every file: 90s, 30m, 1h30m, 1d, 2w.
	d, err := configfile.ParseDuration(s)
	if err != nil {
		v.fail(key, "%v", err)
		return def
	}
	return d
}

func (v *validator) count(key string, n *int, def int) int {
	if n == nil {
		return def
	}
	if *n < 0 {
		v.fail(key, "must be zero or more, got %d", *n)
		return def
	}
	return *n
}

func (v *validator) url(key, s string) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.fail(key, "must be an absolute http(s) URL, got %q", s)
	}
}

func (v *validator) globs(key string, ps []string) {
	for i, p := range ps {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			v.fail(fmt.Sprintf("%s[%d]", key, i), "invalid pattern %q", p)
		}
	}
}

var (
	tierName  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	signalRe  = regexp.MustCompile(`^(SIG)?(USR1|USR2|TERM|INT|HUP|QUIT|CONT|STOP|ALRM|KILL|URG|XCPU)$`)
	emailAddr = regexp.MustCompile(`^[^@\s,<>]+@[^@\s,<>]+$`)
	domainRe  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
)

// ValidSignal reports whether s names a signal a checkpoint may send.
func ValidSignal(s string) bool { return signalRe.MatchString(s) }

func (v *validator) policy(r *rawPolicy) *Policy {
	p := &Policy{
		DryRun:           DefaultDryRun,
		MinWarning:       v.duration("min_warning", r.MinWarning, DefaultMinWarning),
		StaleAfter:       v.duration("stale_after", r.StaleAfter, DefaultStaleAfter),
		CheckpointSignal: DefaultCheckpointSignal,
		RateLimits:       RateLimits{ReclaimsPerCycle: DefaultReclaimsPerCycle, ReclaimsPerHour: DefaultReclaimsPerHour},
		Retry:            Retry{InitialBackoff: DefaultRetryInitialBackoff, MaxBackoff: DefaultRetryMaxBackoff, MaxAttempts: DefaultRetryMaxAttempts},
		Kubernetes:       Kubernetes{Reclaim: DefaultKubernetesReclaim, JupyterHubFallback: HubFallbackNone},
		ProcessGrace:     DefaultProcessGrace,
		Channels:         Channels{AlertDuration: DefaultAlertDuration},
	}
	if r.DryRun != nil {
		p.DryRun = *r.DryRun
	}
	if p.StaleAfter == 0 {
		v.fail("stale_after", "must be greater than zero")
	}
	if r.CheckpointSignal != "" {
		if !ValidSignal(r.CheckpointSignal) {
			v.fail("checkpoint_signal", "unsupported signal %q", r.CheckpointSignal)
		}
		p.CheckpointSignal = strings.TrimPrefix(r.CheckpointSignal, "SIG")
	}
	if r.RateLimits != nil {
		p.RateLimits.ReclaimsPerCycle = v.count("rate_limits.reclaims_per_cycle", r.RateLimits.ReclaimsPerCycle, DefaultReclaimsPerCycle)
		p.RateLimits.ReclaimsPerHour = v.count("rate_limits.reclaims_per_hour", r.RateLimits.ReclaimsPerHour, DefaultReclaimsPerHour)
	}
	if r.Retry != nil {
		v.retry(r.Retry, &p.Retry)
	}
	if r.Kubernetes != nil {
		v.kubernetes(r.Kubernetes, &p.Kubernetes)
	}
	p.OutOfService = v.outOfService(r.OutOfService, p.DryRun)
	if r.Process != nil {
		p.ProcessGrace = v.duration("process.grace", r.Process.Grace, DefaultProcessGrace)
	}
	v.channels(r.Channels, &p.Channels)
	if len(r.Tiers) == 0 {
		v.fail("tiers", "at least one tier is required")
	}
	v.tiers(r.Tiers, p)
	p.Exemptions = v.exemptions(r.Exemptions)
	return p
}

// retry reads the retry section over the defaults in p.
func (v *validator) retry(r *rawRetry, p *Retry) {
	p.InitialBackoff = v.duration("retry.initial_backoff", r.InitialBackoff, DefaultRetryInitialBackoff)
	p.MaxBackoff = v.duration("retry.max_backoff", r.MaxBackoff, DefaultRetryMaxBackoff)
	p.MaxAttempts = v.count("retry.max_attempts", r.MaxAttempts, DefaultRetryMaxAttempts)
	if p.MaxBackoff < p.InitialBackoff {
		v.fail("retry.max_backoff", "must be at least retry.initial_backoff (%s)", p.InitialBackoff)
	}
}

// kubernetes reads the kubernetes section over the defaults in p.
func (v *validator) kubernetes(r *rawKube, p *Kubernetes) {
	switch r.Reclaim {
	case "":
	case KubeEvict, KubeScaleOwner, KubeDelete:
		p.Reclaim = r.Reclaim
	default:
		v.fail("kubernetes.reclaim", "must be one of %s, %s, %s; got %q", KubeEvict, KubeScaleOwner, KubeDelete, r.Reclaim)
	}
	p.DeleteAfterRefusals = v.count("kubernetes.delete_after_refusals", r.DeleteAfterRefusals, 0)
	switch r.JupyterHubFallback {
	case "", HubFallbackNone:
	case HubFallbackEvict:
		p.JupyterHubFallback = HubFallbackEvict
	default:
		v.fail("kubernetes.jupyterhub_fallback", "must be %s or %s; got %q", HubFallbackNone, HubFallbackEvict, r.JupyterHubFallback)
	}
}

// tiers appends the tiers to p (their rules are read against p's
// settings); no two tiers may share a name.
func (v *validator) tiers(rs []rawTier, p *Policy) {
	names := map[string]bool{}
	for i := range rs {
		t := v.tier(fmt.Sprintf("tiers[%d]", i), &rs[i], p)
		if names[t.Name] {
			v.fail(fmt.Sprintf("tiers[%d].name", i), "duplicate tier %q", t.Name)
		}
		names[t.Name] = true
		p.Tiers = append(p.Tiers, t)
	}
}

// exemptions reads the exemptions: each names whom it exempts, by glob,
// and may end at a time.
func (v *validator) exemptions(rs []rawExemption) []Exemption {
	var out []Exemption
	for i, e := range rs {
		key := fmt.Sprintf("exemptions[%d]", i)
		x := Exemption{User: e.User, Team: e.Team, Job: e.Job, Reason: e.Reason}
		if e.User == "" && e.Team == "" && e.Job == "" {
			v.fail(key, "an exemption needs a user, team or job")
		}
		v.globs(key+".user", nonEmpty(e.User))
		v.globs(key+".team", nonEmpty(e.Team))
		v.globs(key+".job", nonEmpty(e.Job))
		if e.Until != "" {
			t, err := time.Parse(time.RFC3339, e.Until)
			if err != nil {
				v.fail(key+".until", "invalid time %q (use RFC 3339, e.g. 2026-12-31T00:00:00Z)", e.Until)
			}
			x.Until = t
		}
		out = append(out, x)
	}
	return out
}

func (v *validator) outOfService(r *rawOutOfSvc, dryRun bool) OutOfService {
	o := OutOfService{DryRun: dryRun, Faults: DefaultOutOfServiceFaults, Window: DefaultOutOfServiceWindow,
		OnRowRemapFailure: DefaultOutOfServiceOnRemap}
	if r == nil {
		return o
	}
	o.Enabled = r.Enabled
	if r.DryRun != nil {
		o.DryRun = *r.DryRun
	}
	o.Faults = v.count("out_of_service.faults", r.Faults, DefaultOutOfServiceFaults)
	if o.Faults == 0 {
		v.fail("out_of_service.faults", "must be at least 1")
	}
	o.Window = v.duration("out_of_service.window", r.Window, DefaultOutOfServiceWindow)
	if o.Window == 0 {
		v.fail("out_of_service.window", "must be greater than zero")
	}
	if r.OnRowRemapFailure != nil {
		o.OnRowRemapFailure = *r.OnRowRemapFailure
	}
	v.globs("out_of_service.exempt_nodes", r.ExemptNodes)
	o.ExemptNodes = r.ExemptNodes
	return o
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

func (v *validator) channels(r *rawChannels, c *Channels) {
	if r == nil {
		return
	}
	if r.Webhook != nil {
		v.url("channels.webhook.url", r.Webhook.URL)
		c.WebhookURL = r.Webhook.URL
		if r.Webhook.Format == "" || slices.Contains(action.WebhookFormats, r.Webhook.Format) {
			c.WebhookFormat = r.Webhook.Format
		} else {
			v.fail("channels.webhook.format", "unknown format %q (one of %s)", r.Webhook.Format, strings.Join(action.WebhookFormats, ", "))
		}
	}
	if r.Alertmanager != nil {
		v.url("channels.alertmanager.url", r.Alertmanager.URL)
		c.AlertmanagerURL = strings.TrimSuffix(r.Alertmanager.URL, "/")
		c.AlertDuration = v.duration("channels.alertmanager.alert_duration", r.Alertmanager.AlertDuration, DefaultAlertDuration)
	}
	if r.Email != nil {
		if r.Email.Domain == "" && len(r.Email.To) == 0 {
			v.fail("channels.email", "needs a domain or recipients (to)")
		}
		if r.Email.Domain != "" && !domainRe.MatchString(r.Email.Domain) {
			v.fail("channels.email.domain", "invalid domain %q", r.Email.Domain)
		}
		for i, a := range r.Email.To {
			if !emailAddr.MatchString(a) {
				v.fail(fmt.Sprintf("channels.email.to[%d]", i), "invalid address %q", a)
			}
		}
		c.EmailDomain, c.EmailTo = r.Email.Domain, r.Email.To
	}
}

func (v *validator) tier(key string, r *rawTier, p *Policy) Tier {
	t := Tier{
		Name:       r.Name,
		Reclaim:    r.Reclaim != nil && *r.Reclaim,
		DryRun:     r.DryRun,
		MaxRunTime: v.duration(key+".max_run_time", r.MaxRunTime, 0),
		Match:      v.match(key+".match", r.Match),
	}
	if !tierName.MatchString(r.Name) {
		v.fail(key+".name", "a tier needs a name of letters, digits, '.', '_' or '-', got %q", r.Name)
	}
	seen := map[schema.Pattern]bool{}
	for i := range r.Rules {
		rk := fmt.Sprintf("%s.rules[%d]", key, i)
		rule := v.rule(rk, &r.Rules[i], p)
		if seen[rule.Pattern] {
			v.fail(rk+".pattern", "duplicate rule for pattern %q in tier %q", rule.Pattern, r.Name)
		}
		seen[rule.Pattern] = true
		t.Rules = append(t.Rules, rule)
	}
	return t
}

// match checks each key against the attributes the analyzer can supply: a
// key that nothing fills would never match, and a tier that never matches
// lets its findings fall through to a later, possibly harsher, tier.
func (v *validator) match(key string, r rawMatch) Match {
	m := Match{}
	keys := make([]string, 0, len(r))
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		n := r[k]
		kk := key + "." + k
		spec, ok := schema.AttrByMatchKey(k)
		if !ok {
			v.fail(kk, "unknown match key %q: nothing fills it (one of %s)", k, strings.Join(schema.MatchKeys(), ", "))
			continue
		}
		if spec.Map {
			var mv map[string]string
			if err := n.Decode(&mv); err != nil || len(mv) == 0 {
				v.fail(kk, "want a non-empty map of name: pattern")
				continue
			}
			names := make([]string, 0, len(mv))
			for name := range mv {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				if name == "" {
					v.fail(kk, "empty name")
				}
				v.globs(kk+"."+name, []string{mv[name]})
			}
			if m.Maps == nil {
				m.Maps = map[schema.Attr]map[string]string{}
			}
			m.Maps[spec.Attr] = mv
			continue
		}
		var lv []string
		if err := n.Decode(&lv); err != nil || len(lv) == 0 {
			v.fail(kk, "want a non-empty list of patterns")
			continue
		}
		v.globs(kk, lv)
		if m.Values == nil {
			m.Values = map[schema.Attr][]string{}
		}
		m.Values[spec.Attr] = lv
	}
	return m
}

func (v *validator) rule(key string, r *rawRule, p *Policy) Rule {
	rule := Rule{Pattern: schema.Pattern(r.Pattern), DryRun: r.DryRun, Reclaim: r.Reclaim,
		MinDuration: v.duration(key+".min_duration", r.MinDuration, 0)}
	if !rule.Pattern.Valid() {
		names := make([]string, len(schema.AllPatterns))
		for i, q := range schema.AllPatterns {
			names[i] = string(q)
		}
		v.fail(key+".pattern", "unknown pattern %q (one of %s)", r.Pattern, strings.Join(names, ", "))
	}
	if r.MinWastedGPUHours != nil {
		if h := *r.MinWastedGPUHours; h < 0 || math.IsNaN(h) || math.IsInf(h, 0) {
			v.fail(key+".min_wasted_gpu_hours", "must be zero or more and finite")
		}
		rule.MinWastedGPUHours = *r.MinWastedGPUHours
	}
	if len(r.Steps) == 0 {
		v.fail(key+".steps", "a rule needs at least one step")
	}
	seen := map[StepAction]bool{}
	var last time.Duration
	for i, s := range r.Steps {
		sk := fmt.Sprintf("%s.steps[%d]", key, i)
		st := Step{Action: StepAction(s.Action), After: v.duration(sk+".after", s.After, 0), Signal: s.Signal, Channels: s.Channels}
		known := false
		for _, a := range StepActions {
			known = known || a == st.Action
		}
		if !known {
			v.fail(sk+".action", "unknown action %q (one of notify, warn, checkpoint, reclaim)", s.Action)
		}
		if seen[st.Action] {
			v.fail(sk+".action", "action %q appears twice in one rule", s.Action)
		}
		if st.Action.Disruptive() && rule.Pattern.Health() {
			v.fail(sk+".action", "pattern %s is a health finding (the job was slowed or ended by its GPU, not wasteful): only notify and warn steps apply", rule.Pattern)
		}
		seen[st.Action] = true
		if st.After < last {
			v.fail(sk+".after", "steps must be in order of their delay (%s is before the previous step's %s)", st.After, last)
		}
		last = st.After
		if s.Signal != "" {
			if st.Action != StepCheckpoint {
				v.fail(sk+".signal", "only a checkpoint step sends a signal")
			} else if !ValidSignal(s.Signal) {
				v.fail(sk+".signal", "unsupported signal %q", s.Signal)
			}
			st.Signal = strings.TrimPrefix(s.Signal, "SIG")
		}
		if st.Action == StepCheckpoint && st.Signal == "" {
			st.Signal = p.CheckpointSignal
		}
		if len(s.Channels) > 0 && st.Action != StepNotify && st.Action != StepWarn {
			v.fail(sk+".channels", "only notify and warn steps have channels")
		}
		for j, c := range s.Channels {
			ck := fmt.Sprintf("%s.channels[%d]", sk, j)
			switch c {
			case ChannelWebhook, ChannelAlertmanager, ChannelEmail:
				if !p.Channels.Configured(c) {
					v.fail(ck, "channel %q is not configured under channels", c)
				}
			default:
				v.fail(ck, "unknown channel %q (one of webhook, alertmanager, email)", c)
			}
		}
		if st.Action.Disruptive() && !seen[StepWarn] {
			// The minimum warning time runs from a delivered warning.
			v.fail(sk+".action", "a %s step needs an earlier warn step in the same rule", st.Action)
		}
		rule.Steps = append(rule.Steps, st)
	}
	return rule
}
