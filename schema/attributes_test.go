package schema

import (
	"slices"
	"testing"
)

// TestAllocationInfoLabels: gpuwatch_allocation_info carries exactly the
// attributes marked Info, so what the exporter publishes about a holder and
// what the analyzer and the policy call it are one list.
func TestAllocationInfoLabels(t *testing.T) {
	var want []string
	for _, s := range AllocationAttrs {
		if s.Info {
			want = append(want, string(s.Attr))
		}
	}
	got := slices.Clone(AllocationInfo.Labels)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s labels %v, want the Info attributes %v", AllocationInfo.Name, got, want)
	}
	seen := map[string]bool{}
	for _, s := range AllocationAttrs {
		if seen[string(s.Attr)] || (s.MatchKey != "" && seen["match:"+s.MatchKey]) {
			t.Errorf("attribute %s or match key %q listed twice", s.Attr, s.MatchKey)
		}
		seen[string(s.Attr)], seen["match:"+s.MatchKey] = true, true
		if s.MatchKey != "" && len(s.Sources) == 0 {
			t.Errorf("match key %q has no source of facts", s.MatchKey)
		}
	}
}
