package policy

import "time"

// Every default of the policy file lives here, so the documented example,
// the validator and the escalation agree on one set of values.
const (
	// DefaultDryRun is true: a policy acts only where it says dry_run: false.
	DefaultDryRun = true
	// DefaultMinWarning is the least time between the first delivered warning
	// and any disruptive step (checkpoint signal or reclaim).
	DefaultMinWarning = 30 * time.Minute
	// DefaultStaleAfter is how old a finding's newest evidence may be before
	// the finding counts as unknown data, on which nothing is ever done.
	DefaultStaleAfter = 15 * time.Minute
	// DefaultReclaimsPerCycle and DefaultReclaimsPerHour bound the damage a
	// bad detector or a bad policy can do.
	DefaultReclaimsPerCycle = 5
	DefaultReclaimsPerHour  = 20
	// A failed step (an eviction refused by a PodDisruptionBudget, a webhook
	// that is down) is retried after DefaultRetryInitialBackoff, doubling up
	// to DefaultRetryMaxBackoff, and given up after DefaultRetryMaxAttempts
	// attempts: a refusal that lasts is not hammered every cycle, and the
	// audit says when the analyzer stopped trying.
	DefaultRetryInitialBackoff = 5 * time.Minute
	DefaultRetryMaxBackoff     = time.Hour
	DefaultRetryMaxAttempts    = 6
	// DefaultCheckpointSignal is sent to Slurm jobs for checkpointing.
	DefaultCheckpointSignal = "USR1"
	// DefaultKubernetesReclaim is the Eviction API, which honours PodDisruptionBudgets.
	DefaultKubernetesReclaim = KubeEvict
	// DefaultProcessGrace is the time between SIGTERM and SIGKILL for orphans.
	DefaultProcessGrace = 30 * time.Second
	// DefaultAlertDuration is how long an Alertmanager alert stays firing
	// unless the next warning renews it.
	DefaultAlertDuration = time.Hour
	// A node is taken out of service (out_of_service, off unless enabled)
	// after DefaultOutOfServiceFaults hardware faults on its GPUs within
	// DefaultOutOfServiceWindow, or after one row-remap failure: one XID 79
	// can be a loose riser that a reseat fixes, a second within the week
	// is a board to replace before it kills more jobs.
	DefaultOutOfServiceFaults  = 2
	DefaultOutOfServiceWindow  = 7 * 24 * time.Hour
	DefaultOutOfServiceOnRemap = true
)

// DefaultChannels are where notify and warn steps go when a step names none
// (when none of them is configured, every configured channel is used).
var DefaultChannels = map[StepAction][]string{
	StepNotify: {ChannelWebhook},
	StepWarn:   {ChannelAlertmanager, ChannelEmail},
}
