package schema

// Health patterns: what slowed or ended a job, not what it wasted. Their
// findings are never waste (WastedGPUHours is always 0; slowed time is
// counted apart, as degraded GPU-hours) and never reclaim: the policy
// refuses a disruptive step for them, whatever a policy file says. They are
// kept out of Patterns, the list of waste patterns every waste total and
// waste test walks.
const (
	// Straggler: one GPU of a multi-GPU job throttled or clocked lower
	// than its peers, which wait for it at every synchronisation.
	Straggler Pattern = "straggler"
	// Throttled: the job's GPUs spent a large share of their busy time
	// under a throttling clock-event reason (power cap, thermal, hardware
	// slowdown), all alike.
	Throttled Pattern = "throttled"
	// GPUFault: a hardware XID, an uncorrectable ECC error or a row-remap
	// failure on one of the job's GPUs; the job's end, when it followed
	// within minutes, is attributed to it.
	GPUFault Pattern = "gpu_fault"
	// AppXID: an XID NVIDIA's catalogue attributes to the application
	// (an illegal address, a kernel fault): the job's own code, not its GPU.
	AppXID Pattern = "app_xid"
)

var healthSpecs = []PatternSpec{
	{Straggler, SeverityWarning, ActionNotify, "Straggler", "A throttled GPU slowed the whole job (straggler)"},
	{Throttled, SeverityInfo, ActionNotify, "Throttled", "GPUs throttled (power or thermal)"},
	{GPUFault, SeverityCritical, ActionNotify, "GPU fault", "GPU hardware fault (XID, ECC, row remap)"},
	{AppXID, SeverityInfo, ActionNotify, "Application XID", "Application error reported by the driver (XID)"},
}

// HealthPatterns lists the health patterns in a stable order.
var HealthPatterns = func() []Pattern {
	out := make([]Pattern, len(healthSpecs))
	for i, s := range healthSpecs {
		out[i] = s.Pattern
	}
	return out
}()

// AllPatterns is Patterns followed by HealthPatterns: every pattern a
// finding may carry.
var AllPatterns = append(append([]Pattern(nil), Patterns...), HealthPatterns...)

// Health reports whether p is a health pattern (never waste, never reclaims).
func (p Pattern) Health() bool {
	for _, s := range healthSpecs {
		if s.Pattern == p {
			return true
		}
	}
	return false
}

// EvidenceDegraded is the evidence key under which a health finding carries
// the GPU-hours its job ran slowed (the estimated time lost times the GPUs
// that waited): accounting's Degraded total, never waste.
const EvidenceDegraded = "degraded_gpu_hours"
