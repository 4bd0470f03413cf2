package rules

import (
	"fmt"
	"strings"

	c "github.com/gpuwatch/gpuwatch/schema"
)

// onGPU matches a GPU's series across metrics: the node and the device.
var onGPU = fmt.Sprintf("on (%s, %s)", c.LabelHostname, c.LabelUUID)

// ClockBit is a PromQL condition true (1) while the clock-event reason named
// reason is set in the bitmask selected by sel. PromQL has no bitwise
// operators: bit n of x is floor(x / 2^n) % 2. The bit comes from the
// catalogue's clock-event table; an unknown reason is a programming error.
func ClockBit(sel, reason string) string {
	return fmt.Sprintf("floor(%s / %d) %% 2", sel, reasonBit(reason))
}

func reasonBit(reason string) uint64 {
	for _, r := range c.ClockEventReasons {
		if r.Name == reason {
			return r.Bit
		}
	}
	panic(fmt.Sprintf("rules: no clock-event reason %q in the catalogue", reason))
}

// bitSet is the alert condition "reason is set" on the clock-event bitmask.
func bitSet(reason string) string {
	return fmt.Sprintf("(%s == 1)", ClockBit(c.ClockEvents.Name, reason))
}

// anyOf joins conditions with `or`, one per line.
func anyOf(conds ...string) string {
	return strings.Join(conds, "\nor ")
}

// teamed labels the series of cond with the team holding each GPU (from the
// team recording rule) and keeps the series of GPUs nobody holds, or whose
// data has no gpuwatch_* series at all (a stock dcgm-exporter), unlabelled.
// PromQL needs the condition on both sides of the `or`; it is written once
// here.
func teamed(cond string) string {
	cond = indent(cond, "  ")
	return fmt.Sprintf("(\n%s\n)\n* %s group_left (%s) %s\nor %s (\n%s\n)",
		cond, onGPU, c.LabelTeam, teamRule.Record, onGPU, cond)
}

func indent(s, by string) string {
	return by + strings.ReplaceAll(s, "\n", "\n"+by)
}

// increased is "metric sel grew by more than min over window".
func increased(sel, window string, min float64) string {
	return fmt.Sprintf("(increase(%s[%s]) > %g)", sel, window, min)
}

// xidMatcher selects XID codes: =~ for codes, !~ to exclude them.
func xidMatcher(op string, codes []string) string {
	return fmt.Sprintf(`%s{%s%s"%s"}`, c.XIDErrors.Name, c.LabelXID, op, strings.Join(codes, "|"))
}

// xidSeen is "an XID of the selected codes happened in the last 10 minutes":
// an increase of the counter, or a counter series that did not exist 10
// minutes ago (its first XID creates it at 1, which increase cannot see).
func xidSeen(sel string) string {
	return fmt.Sprintf("(increase(%s[10m]) > 0)\nor (%s * 1 > 0 unless %s offset 10m)", sel, sel, sel)
}

// lastOver is the newest sample of metric within window, also for a series
// gone stale: what is left of a target that stopped answering.
func lastOver(m *c.Metric, window string) string {
	return fmt.Sprintf("last_over_time(%s[%s])", m.Name, window)
}
