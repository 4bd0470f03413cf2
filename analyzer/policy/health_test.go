package policy

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestHealthPatternsNeverDisrupt: a policy file cannot give a health
// pattern a checkpoint or reclaim step, and a rule that has one anyway
// (built in code, or a future parser's slip) is evaluated without it.
func TestHealthPatternsNeverDisrupt(t *testing.T) {
	for _, p := range schema.HealthPatterns {
		for _, action := range []string{"checkpoint", "reclaim"} {
			_, err := Parse([]byte("tiers:\n  - name: all\n    reclaim: true\n    rules:\n      - pattern: " + string(p) +
				"\n        steps: [{action: warn}, {action: " + action + ", after: 1h}]\n"))
			if err == nil || !strings.Contains(err.Error(), "health finding") {
				t.Errorf("%s with a %s step: err %v, want a refusal", p, action, err)
			}
		}
	}
	pol, err := Parse([]byte("dry_run: false\ntiers:\n  - name: all\n    reclaim: true\n    rules:\n      - pattern: straggler\n        steps: [{action: notify}, {action: warn}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := &pol.Tiers[0].Rules[0]
	r.Steps = append(r.Steps, Step{Action: StepCheckpoint}, Step{Action: StepReclaim, After: time.Hour})
	now := time.Date(2026, 11, 16, 12, 0, 0, 0, time.UTC)
	f := &finding.Finding{Pattern: schema.Straggler, Job: "1", Hostname: "n1", Start: now.Add(-3 * time.Hour), End: now}
	ev := pol.Evaluate(f, slurmFacts("p", "q", "u", "t"), now)
	if !ev.Qualifies || ev.ReclaimAllowed || ev.Rule == nil {
		t.Fatalf("evaluation %+v: want a qualifying rule with reclaim not allowed", ev)
	}
	for _, st := range ev.Rule.Steps {
		if st.Action.Disruptive() {
			t.Errorf("straggler evaluated with a %s step", st.Action)
		}
	}
	if len(ev.Rule.Steps) != 2 {
		t.Errorf("steps %v, want notify and warn", ev.Rule.Steps)
	}
	// The waste pattern's rule keeps its steps.
	if got := len(pol.Tiers[0].Rules[0].Steps); got != 4 {
		t.Errorf("the policy's own rule lost steps: %d", got)
	}
}
