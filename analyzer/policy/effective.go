package policy

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Effective is one rule as it will run: its tier, and the dry-run and
// reclaim switches after tier and rule overrides.
type Effective struct {
	Tier, Match string
	Rule        *Rule
	DryRun      bool
	Reclaim     bool
}

// Effective lists every rule of every tier, in order.
func (p *Policy) Effective() []Effective {
	var out []Effective
	for i := range p.Tiers {
		t := &p.Tiers[i]
		for j := range t.Rules {
			r := &t.Rules[j]
			out = append(out, Effective{Tier: t.Name, Match: t.Match.String(), Rule: r, DryRun: p.effectiveDryRun(t, r),
				Reclaim: t.Reclaim && (r.Reclaim == nil || *r.Reclaim)})
		}
	}
	return out
}

// String writes the match as the policy file spells it; "everything" for an
// empty one.
func (m *Match) String() string {
	var parts []string
	for _, s := range schema.MatchAttrs() {
		if g, ok := m.Values[s.Attr]; ok {
			parts = append(parts, s.MatchKey+"="+strings.Join(g, "|"))
		}
		if mv, ok := m.Maps[s.Attr]; ok {
			keys := make([]string, 0, len(mv))
			for k := range mv {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				parts = append(parts, s.MatchKey+"."+k+"="+mv[k])
			}
		}
	}
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, " ")
}

// reclaims reports whether a rule has a reclaim step.
func (r *Rule) reclaims() bool {
	for _, s := range r.Steps {
		if s.Action == StepReclaim {
			return true
		}
	}
	return false
}

// Warnings are legal but risky choices: a catch-all tier that reclaims
// takes every allocation no earlier tier selected, whatever its partition
// or namespace; a tier after a catch-all is never reached; and every tier,
// exemption and trusted key a workload's author can sway, naming who.
func (p *Policy) Warnings() []string {
	var out []string
	for i := range p.Tiers {
		t := &p.Tiers[i]
		if !t.Match.Empty() {
			continue
		}
		for j := range t.Rules {
			r := &t.Rules[j]
			// Orphaned processes belong to no allocation: no tier could select them.
			if t.Reclaim && (r.Reclaim == nil || *r.Reclaim) && r.reclaims() && r.Pattern != schema.OrphanProcess {
				mode := "in dry-run"
				if !p.effectiveDryRun(t, r) {
					mode = "FOR REAL"
				}
				out = append(out, fmt.Sprintf("tier %q matches everything and reclaims %s %s: every allocation that no earlier tier selects can be cancelled or evicted", t.Name, r.Pattern, mode))
			}
		}
		if i+1 < len(p.Tiers) {
			out = append(out, fmt.Sprintf("tier %q matches everything: the tiers after it (%q...) are never used", t.Name, p.Tiers[i+1].Name))
		}
	}
	out = append(out, p.trustWarnings()...)
	for i := range p.Tiers {
		if s := p.Tiers[i].Match.schedulers(); len(s) == 0 {
			out = append(out, fmt.Sprintf("tier %q matches attributes that no one scheduler has together: it selects nothing", p.Tiers[i].Name))
		}
	}
	return out
}

// schedulers lists the schedulers whose allocations can have every attribute
// the match names (all of them for an empty match).
func (m *Match) schedulers() []string {
	out := []string{schema.SchedulerSlurm, schema.SchedulerKubernetes}
	for _, s := range schema.MatchAttrs() {
		_, v := m.Values[s.Attr]
		_, mv := m.Maps[s.Attr]
		if !v && !mv {
			continue
		}
		var keep []string
		for _, sch := range out {
			if slices.Contains(s.Sources, sch) {
				keep = append(keep, sch)
			}
		}
		out = keep
	}
	return out
}

func (p *Policy) effectiveDryRun(t *Tier, r *Rule) bool {
	d := p.DryRun
	if t.DryRun != nil {
		d = *t.DryRun
	}
	if r.DryRun != nil {
		d = *r.DryRun
	}
	return d
}

// WriteEffective prints the effective policy: each tier, its match, and
// each rule's steps with the effective dry-run and reclaim switches.
func (p *Policy) WriteEffective(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "dry_run=%v min_warning=%s stale_after=%s reclaims_per_cycle=%d reclaims_per_hour=%d\n",
		p.DryRun, p.MinWarning, p.StaleAfter, p.RateLimits.ReclaimsPerCycle, p.RateLimits.ReclaimsPerHour)
	fmt.Fprintf(&b, "workload decides: %s\n", p.Trust)
	last := ""
	for _, e := range p.Effective() {
		if e.Tier != last {
			fmt.Fprintf(&b, "tier %s  match: %s\n", e.Tier, e.Match)
			last = e.Tier
		}
		steps := make([]string, 0, len(e.Rule.Steps))
		for _, s := range e.Rule.Steps {
			steps = append(steps, fmt.Sprintf("%s@%s", s.Action, s.After))
		}
		mode := "dry-run"
		if !e.DryRun {
			mode = "FOR REAL"
		}
		reclaim := "no reclaim"
		if e.Reclaim && e.Rule.reclaims() {
			reclaim = "reclaims"
		}
		fmt.Fprintf(&b, "  %-17s %-8s %-10s %s\n", e.Rule.Pattern, mode, reclaim, strings.Join(steps, " "))
	}
	for _, x := range p.Exemptions {
		var who []string
		for _, f := range [][2]string{{"user", x.User}, {"team", x.Team}, {"job", x.Job}} {
			if f[1] != "" {
				who = append(who, f[0]+"="+f[1])
			}
		}
		until := ""
		if !x.Until.IsZero() {
			until = " until " + x.Until.UTC().Format("2006-01-02T15:04:05Z")
		}
		fmt.Fprintf(&b, "exempt %s%s\n", strings.Join(who, " "), until)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
