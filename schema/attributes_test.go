package schema

import (
	"reflect"
	"slices"
	"strings"
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

// TestEveryMatchKeyHasAnOwner: each attribute a policy may match says who
// writes it, so the policy, check-config and the docs can tell the
// operator's facts from the workload's; the ones a job's author writes
// freely are exactly these.
func TestEveryMatchKeyHasAnOwner(t *testing.T) {
	var workload []string
	for _, s := range MatchAttrs() {
		if s.Owner != OwnerOperator && s.Owner != OwnerWorkload {
			t.Errorf("match key %q has owner %q", s.MatchKey, s.Owner)
		}
		if s.Writers == "" {
			t.Errorf("match key %q does not say who writes it", s.MatchKey)
		}
		if s.WorkloadOwned() {
			workload = append(workload, s.MatchKey)
		}
	}
	if want := []string{"job_names", "kinds", "labels", "annotations"}; !slices.Equal(workload, want) {
		t.Errorf("workload-owned match keys %v, want %v", workload, want)
	}
	var listed []string
	for _, s := range WorkloadMatchAttrs() {
		listed = append(listed, s.MatchKey)
	}
	if !slices.Equal(listed, workload) {
		t.Errorf("WorkloadMatchAttrs %v, want %v", listed, workload)
	}
}

// TestValidLabelKey: the keys the API server accepts on a pod's labels and
// annotations, and none other; a pattern is refused as one.
func TestValidLabelKey(t *testing.T) {
	for _, c := range []struct {
		key, want string // want: part of the error, "" for valid
	}{
		{"team", ""}, {"Team", ""}, {"a", ""}, {"9", ""}, {"a.b_c-d", ""}, {ExemptKey, ""}, {"app.kubernetes.io/name", ""},
		{strings.Repeat("n", 63), ""}, {strings.Repeat("p", 253) + "/" + strings.Repeat("n", 63), ""},
		{"", "empty key"}, {"*", "is a pattern"}, {"te?m", "is a pattern"}, {"[t]eam", "is a pattern"}, {`te\am`, "is a pattern"},
		{strings.Repeat("n", 64), "the name must be"}, {strings.Repeat("p", 254) + "/x", "the prefix"},
		{strings.Repeat("k", 400), "key of 400 bytes"}, {"t\u00ebam", "the name must be"}, {"-team", "the name must be"},
		{"team.", "the name must be"}, {"my team", "the name must be"}, {"a/b/c", "the name must be"}, {"/team", "the prefix"},
		{"team/", "the name must be"}, {"Example.COM/x", "the prefix"}, {"a..b/x", "the prefix"}, {"te\x00am", "the name must be"},
	} {
		err := ValidLabelKey(c.key)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%.40q refused: %v", c.key, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%.40q: error %v, want %q", c.key, err, c.want)
		}
	}
}
