package policy

import (
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// policyFile is the policy file's shape. Every field has a type that
// refuses a bad value as it is decoded (internal/configfile's field types
// and the ones below), so ParseFile keeps only the rules that join keys.
// defaultFile holds what a key left out means.
type policyFile struct {
	DryRun           bool                `yaml:"dry_run"`
	MinWarning       configfile.Delay    `yaml:"min_warning"`
	StaleAfter       configfile.Duration `yaml:"stale_after"`
	CheckpointSignal signal              `yaml:"checkpoint_signal"`
	RateLimits       rateLimitsFile      `yaml:"rate_limits"`
	Retry            retryFile           `yaml:"retry"`
	Kubernetes       kubernetesFile      `yaml:"kubernetes"`
	OutOfService     outOfServiceFile    `yaml:"out_of_service"`
	Process          processFile         `yaml:"process"`
	Channels         channelsFile        `yaml:"channels"`
	Tiers            []tierFile          `yaml:"tiers"`
	Exemptions       []exemptionFile     `yaml:"exemptions"`
	// TrustWorkloadKeys (trust.go) is spelled trustKey in messages.
	TrustWorkloadKeys trustFile `yaml:"trust_workload_keys"`
}

type rateLimitsFile struct {
	ReclaimsPerCycle configfile.Count `yaml:"reclaims_per_cycle"`
	ReclaimsPerHour  configfile.Count `yaml:"reclaims_per_hour"`
}

type retryFile struct {
	InitialBackoff configfile.Delay `yaml:"initial_backoff"`
	MaxBackoff     configfile.Delay `yaml:"max_backoff"`
	MaxAttempts    configfile.Count `yaml:"max_attempts"`
}

type kubernetesFile struct {
	Reclaim             kubeReclaim      `yaml:"reclaim"`
	DeleteAfterRefusals configfile.Count `yaml:"delete_after_refusals"`
	JupyterHubFallback  hubFallback      `yaml:"jupyterhub_fallback"`
}

type outOfServiceFile struct {
	Enabled bool `yaml:"enabled"`
	// DryRun left out follows the policy's dry_run.
	DryRun            *bool               `yaml:"dry_run"`
	Faults            configfile.Count    `yaml:"faults"`
	Window            configfile.Duration `yaml:"window"`
	OnRowRemapFailure bool                `yaml:"on_row_remap_failure"`
	ExemptNodes       []configfile.Glob   `yaml:"exempt_nodes"`
}

type processFile struct {
	Grace configfile.Delay `yaml:"grace"`
}

// channelsFile's sections are pointers: a channel exists when its
// section is present.
type channelsFile struct {
	Webhook      *webhookFile      `yaml:"webhook"`
	Alertmanager *alertmanagerFile `yaml:"alertmanager"`
	Email        *emailFile        `yaml:"email"`
}

type webhookFile struct {
	URL    configfile.HTTPURL `yaml:"url"`
	Format webhookFormat      `yaml:"format"`
}

type alertmanagerFile struct {
	URL configfile.HTTPURL `yaml:"url"`
	// AlertDuration left out is DefaultAlertDuration.
	AlertDuration configfile.Duration `yaml:"alert_duration"`
}

type emailFile struct {
	Domain domain    `yaml:"domain"`
	To     []address `yaml:"to"`
}

type tierFile struct {
	Name       tierName         `yaml:"name"`
	Match      matchFile        `yaml:"match"`
	Reclaim    bool             `yaml:"reclaim"`
	DryRun     *bool            `yaml:"dry_run"`
	MaxRunTime configfile.Delay `yaml:"max_run_time"`
	Rules      []ruleFile       `yaml:"rules"`
}

// matchFile is checked key by key against the attributes facts can
// supply (ParseFile's match): which shape a key takes depends on the key.
type matchFile map[string]yaml.Node

type ruleFile struct {
	Pattern           pattern           `yaml:"pattern"`
	DryRun            *bool             `yaml:"dry_run"`
	Reclaim           *bool             `yaml:"reclaim"`
	MinWastedGPUHours configfile.Amount `yaml:"min_wasted_gpu_hours"`
	MinDuration       configfile.Delay  `yaml:"min_duration"`
	Steps             []stepFile        `yaml:"steps"`
}

type stepFile struct {
	Action   StepAction       `yaml:"action"`
	After    configfile.Delay `yaml:"after"`
	Signal   signal           `yaml:"signal"`
	Channels []channel        `yaml:"channels"`
}

type exemptionFile struct {
	User   configfile.Glob  `yaml:"user"`
	Team   configfile.Glob  `yaml:"team"`
	Job    configfile.Glob  `yaml:"job"`
	Until  *configfile.Time `yaml:"until"`
	Reason string           `yaml:"reason"`
}

// defaultFile is the policy every file is decoded over: the values a key
// left out takes, all from defaults.go.
func defaultFile() policyFile {
	return policyFile{
		DryRun:           DefaultDryRun,
		MinWarning:       configfile.Delay(DefaultMinWarning),
		StaleAfter:       configfile.Duration(DefaultStaleAfter),
		CheckpointSignal: DefaultCheckpointSignal,
		RateLimits: rateLimitsFile{ReclaimsPerCycle: DefaultReclaimsPerCycle,
			ReclaimsPerHour: DefaultReclaimsPerHour},
		Retry: retryFile{InitialBackoff: configfile.Delay(DefaultRetryInitialBackoff),
			MaxBackoff: configfile.Delay(DefaultRetryMaxBackoff), MaxAttempts: DefaultRetryMaxAttempts},
		Kubernetes: kubernetesFile{Reclaim: DefaultKubernetesReclaim, JupyterHubFallback: HubFallbackNone},
		OutOfService: outOfServiceFile{Faults: DefaultOutOfServiceFaults,
			Window: configfile.Duration(DefaultOutOfServiceWindow), OnRowRemapFailure: DefaultOutOfServiceOnRemap},
		Process: processFile{Grace: configfile.Delay(DefaultProcessGrace)},
	}
}

// UnmarshalYAML accepts the four steps only.
func (a *StepAction) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, a, "action", StepActions...)
}

// signal is a signal a checkpoint may send, kept without "SIG".
type signal string

var signalRe = regexp.MustCompile(`^(SIG)?(USR1|USR2|TERM|INT|HUP|QUIT|CONT|STOP|ALRM|KILL|URG|XCPU)$`)

// ValidSignal reports whether s names a signal a checkpoint may send.
func ValidSignal(s string) bool { return signalRe.MatchString(s) }

// UnmarshalYAML accepts the signals a job may catch to checkpoint.
func (s *signal) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if !ValidSignal(v) {
		return configfile.FieldError(n, "unsupported signal %q", v)
	}
	*s = signal(strings.TrimPrefix(v, "SIG"))
	return nil
}

// kubeReclaim is how a Kubernetes allocation is reclaimed.
type kubeReclaim string

// UnmarshalYAML accepts the three modes.
func (k *kubeReclaim) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, k, "reclaim mode", KubeEvict, KubeScaleOwner, KubeDelete)
}

// hubFallback is what happens to a notebook the hub cannot stop.
type hubFallback string

// UnmarshalYAML accepts none and evict.
func (h *hubFallback) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, h, "fallback", HubFallbackNone, HubFallbackEvict)
}

// webhookFormat is a body layout the webhook notifier can write.
type webhookFormat string

// UnmarshalYAML accepts action.WebhookFormats.
func (f *webhookFormat) UnmarshalYAML(n *yaml.Node) error {
	var v string
	return errOr(configfile.OneOf(n, &v, "format", action.WebhookFormats...), func() { *f = webhookFormat(v) })
}

// channel names where a notify or warn step goes.
type channel string

// UnmarshalYAML accepts the three channels.
func (c *channel) UnmarshalYAML(n *yaml.Node) error {
	return configfile.OneOf(n, c, "channel", ChannelWebhook, ChannelAlertmanager, ChannelEmail)
}

// pattern is a waste or health pattern a rule applies to.
type pattern schema.Pattern

// UnmarshalYAML accepts the patterns the analyzer detects.
func (p *pattern) UnmarshalYAML(n *yaml.Node) error {
	var v schema.Pattern
	return errOr(configfile.OneOf(n, &v, "pattern", schema.AllPatterns...), func() { *p = pattern(v) })
}

// tierName names a tier in the audit, the findings and the metrics.
type tierName string

var tierNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// UnmarshalYAML accepts 1 to 64 letters, digits, '.', '_' or '-'.
func (t *tierName) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if !tierNameRe.MatchString(v) {
		return configfile.FieldError(n, "a tier needs a name of letters, digits, '.', '_' or '-', got %q", v)
	}
	*t = tierName(v)
	return nil
}

// address is one email recipient.
type address string

var addressRe = regexp.MustCompile(`^[^@\s,<>]+@[^@\s,<>]+$`)

// UnmarshalYAML accepts one plain address: no display name, no list.
func (a *address) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if !addressRe.MatchString(v) {
		return configfile.FieldError(n, "invalid address %q", v)
	}
	*a = address(v)
	return nil
}

// domain is the mail domain owners' addresses are formed in.
type domain string

var domainRe = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)

// UnmarshalYAML accepts a host name.
func (d *domain) UnmarshalYAML(n *yaml.Node) error {
	var v string
	if err := n.Decode(&v); err != nil {
		return err
	}
	if !domainRe.MatchString(v) {
		return configfile.FieldError(n, "invalid domain %q", v)
	}
	*d = domain(v)
	return nil
}

// errOr returns err, or runs set and returns nil.
func errOr(err error, set func()) error {
	if err != nil {
		return err
	}
	set()
	return nil
}
