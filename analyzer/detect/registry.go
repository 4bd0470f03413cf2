package detect

import (
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Spec is everything gpuwatch knows of one waste pattern besides its
// thresholds (those live in the analyzer configuration): its entry in the
// schema's pattern registry (severity, recommended action, names for people),
// the advice a report gives, and the rule that finds it. Each pattern
// registers its Spec from its own file; the engine, the web page, the reports
// and the policy read them from here.
type Spec struct {
	schema.PatternSpec
	// Cumulative patterns judge an allocation's whole history, so their
	// verdict at the last known step supersedes earlier ones.
	Cumulative bool
	// OneOff patterns are reported once, when first seen, as a closed episode.
	OneOff bool
	// Advise writes the advice for people from a finding's evidence.
	Advise func(f *finding.Finding) string
	// judge decides on one allocation at one step; nil for patterns found
	// outside allocations (orphaned processes).
	judge func(j *judge) *verdict
}

// verdict is a detector's decision that its pattern holds.
type verdict struct {
	from     time.Time
	wasted   float64
	evidence map[string]float64
	advice   string
	// to ends the span when it is not the judged step (one-off patterns).
	to time.Time
	// quiet: judged once and found nothing; a one-off is then done.
	quiet bool
	// action and severity, when set, replace the pattern's defaults: the
	// treatment the allocation's kind calls for.
	action   schema.Action
	severity schema.Severity
	// gpu is the one GPU a health finding is about (UUID).
	gpu string
}

var registry = map[schema.Pattern]*Spec{}

// register adds a pattern's Spec; called from each pattern's file.
func register(p schema.Pattern, s Spec) {
	if _, dup := registry[p]; dup {
		panic(fmt.Sprintf("detect: pattern %s registered twice", p))
	}
	ps, ok := p.Spec()
	if !ok {
		panic(fmt.Sprintf("detect: pattern %s missing from the schema's pattern registry", p))
	}
	s.PatternSpec = ps
	registry[p] = &s
}

// Lookup returns a pattern's Spec.
func Lookup(p schema.Pattern) (Spec, bool) {
	s, ok := registry[p]
	if !ok {
		ps, _ := p.Spec()
		return Spec{PatternSpec: ps}, false
	}
	return *s, true
}

// Specs lists every registered pattern in schema.Patterns' order.
func Specs() []Spec {
	out := make([]Spec, 0, len(registry))
	for _, p := range schema.AllPatterns {
		if s, ok := registry[p]; ok {
			out = append(out, *s)
		}
	}
	return out
}

// DefaultAction returns the action recommended for a pattern.
func DefaultAction(p schema.Pattern) schema.Action {
	s, _ := Lookup(p)
	return s.Action
}

// Cumulative reports whether a pattern judges an allocation's whole history.
func Cumulative(p schema.Pattern) bool {
	s, _ := Lookup(p)
	return s.Cumulative
}

// Label is a pattern's short name for people.
func Label(p schema.Pattern) string {
	s, _ := Lookup(p)
	return s.Label
}

// Title is a pattern's name in reports.
func Title(p schema.Pattern) string {
	s, _ := Lookup(p)
	return s.Title
}

// Advise returns the advice for a finding: the pattern's own, from the
// finding's evidence, or the finding's sentence for an unknown pattern.
func Advise(f *finding.Finding) string {
	if s, ok := Lookup(f.Pattern); ok && s.Advise != nil {
		return s.Advise(f)
	}
	return f.Advice
}
