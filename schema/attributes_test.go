package schema

import (
	"reflect"
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

// TestAllocationFieldsAreTheAttributes: every attribute sets exactly one
// field of Allocation, of its own kind (scalar or map), and every field is
// set by exactly one attribute, so the struct and AllocationAttrs cannot
// drift apart.
func TestAllocationFieldsAreTheAttributes(t *testing.T) {
	typ := reflect.TypeOf(Allocation{})
	owner := map[string]Attr{}
	for _, s := range AllocationAttrs {
		var a Allocation
		var ok bool
		if s.Map {
			ok = a.SetMap(s.Attr, map[string]string{"k": "v"})
		} else {
			ok = a.Set(s.Attr, "v")
		}
		if !ok {
			t.Errorf("attribute %s (map %v) has no field", s.Attr, s.Map)
			continue
		}
		v := reflect.ValueOf(a)
		var set []string
		for i := range typ.NumField() {
			if !v.Field(i).IsZero() {
				set = append(set, typ.Field(i).Name)
			}
		}
		if len(set) != 1 {
			t.Errorf("attribute %s sets fields %v, want exactly one", s.Attr, set)
			continue
		}
		if o, dup := owner[set[0]]; dup {
			t.Errorf("field %s is set by both %s and %s", set[0], o, s.Attr)
		}
		owner[set[0]] = s.Attr
		if got := a.Value(s.Attr) + func() string { return a.Map(s.Attr)["k"] }(); got != "v" {
			t.Errorf("attribute %s reads back %q", s.Attr, got)
		}
	}
	for i := range typ.NumField() {
		if _, ok := owner[typ.Field(i).Name]; !ok {
			t.Errorf("field %s is no attribute of AllocationAttrs", typ.Field(i).Name)
		}
	}
	a := Allocation{Job: "1", User: "u", Team: "t", Kind: KindBatch, Account: "acc", JobName: "n", Scheduler: SchedulerSlurm, Partition: "p"}
	if got, want := a.InfoLabelValues(), []string{"1", "u", "t", KindBatch, "acc", "n", SchedulerSlurm}; !slices.Equal(got, want) {
		t.Errorf("InfoLabelValues() = %v, want %v in the order of %v", got, want, AllocationInfo.Labels)
	}
}
