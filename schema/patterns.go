package schema

// Pattern is a waste pattern: the `pattern` value of findings, of the
// analyzer's metrics and of a policy's rules.
type Pattern string

// The waste patterns.
const (
	CPUOnly         Pattern = "cpu_only"
	OverRequested   Pattern = "over_requested"
	Stuck           Pattern = "stuck"
	StartupOverhead Pattern = "startup_overhead"
	IdleSession     Pattern = "idle_session"
	LowUtilization  Pattern = "low_utilization"
	Overlong        Pattern = "overlong"
	OrphanProcess   Pattern = "orphan_process"
)

// Severity of a finding: the `severity` value of findings and of the
// analyzer's metrics.
type Severity string

const (
	SeverityInfo     Severity = "info"
	SeverityWarning  Severity = "warning"
	SeverityCritical Severity = "critical"
)

// Action is a step the analyzer can recommend or the policy can take: the
// `action` value of findings, of the audit log and of the analyzer's metrics.
type Action string

const (
	ActionNotify     Action = "notify"
	ActionWarn       Action = "warn"
	ActionCheckpoint Action = "checkpoint"
	ActionReclaim    Action = "reclaim"
	ActionKill       Action = "kill"   // orphaned process
	ActionResize     Action = "resize" // ask for fewer or smaller GPUs (MIG)
	// ActionDrain takes a node out of service after its GPUs faulted:
	// Slurm drains it, Kubernetes cordons it. Running jobs are left alone.
	ActionDrain Action = "drain"
)

// PatternSpec is what every part of gpuwatch knows of a waste pattern besides
// how it is detected: its severity, the action recommended by default (the
// policy decides what is done), and its names for people.
type PatternSpec struct {
	Pattern  Pattern
	Severity Severity
	Action   Action
	// Label is the short name (tables, web page); Title the name in reports.
	Label, Title string
}

// patternSpecs is the registry of waste patterns, in the stable order every
// list of patterns follows. A pattern's detector (analyzer/detect) registers
// under the same name.
var patternSpecs = []PatternSpec{
	{CPUOnly, SeverityCritical, ActionReclaim, "CPU only", "GPU never used (CPU only)"},
	{OverRequested, SeverityWarning, ActionResize, "Over-requested", "More GPUs than used"},
	{Stuck, SeverityCritical, ActionReclaim, "Stuck", "Stuck, no progress"},
	{StartupOverhead, SeverityInfo, ActionNotify, "Startup overhead", "Slow start (staging)"},
	{IdleSession, SeverityWarning, ActionReclaim, "Idle session", "Idle interactive session"},
	{LowUtilization, SeverityInfo, ActionResize, "Low utilization", "Low utilisation (fits MIG / smaller GPU)"},
	{Overlong, SeverityWarning, ActionCheckpoint, "Overlong", "Ran past time limit"},
	{OrphanProcess, SeverityCritical, ActionKill, "Orphan process", "Orphaned GPU process"},
}

// Patterns lists every pattern in a stable order.
var Patterns = func() []Pattern {
	out := make([]Pattern, len(patternSpecs))
	for i, s := range patternSpecs {
		out[i] = s.Pattern
	}
	return out
}()

// PatternSpecs returns the registry of waste patterns, in Patterns' order.
func PatternSpecs() []PatternSpec { return append([]PatternSpec(nil), patternSpecs...) }

// Spec returns a pattern's entry in the registry.
func (p Pattern) Spec() (PatternSpec, bool) {
	for _, s := range patternSpecs {
		if s.Pattern == p {
			return s, true
		}
	}
	for _, s := range healthSpecs {
		if s.Pattern == p {
			return s, true
		}
	}
	return PatternSpec{Pattern: p, Label: string(p), Title: string(p)}, false
}

// Valid reports whether p is a known pattern.
func (p Pattern) Valid() bool {
	_, ok := p.Spec()
	return ok
}
