package mig

import (
	"fmt"
	"strings"
	"testing"
)

func TestLookup(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA A100-SXM4-40GB": "A100-40GB", "NVIDIA A100-SXM4-80GB": "A100-80GB", "NVIDIA A100 80GB PCIe": "A100-80GB",
		"NVIDIA H100 80GB HBM3": "H100-80GB", "NVIDIA H100 NVL": "H100-94GB", "NVIDIA H200": "H200-141GB",
		"NVIDIA B200": "B200-180GB", "NVIDIA L40S": "", "Tesla T4": "",
	} {
		got := ""
		if m, ok := Lookup(name); ok {
			got = m.Key
		}
		if got != want {
			t.Errorf("Lookup(%q) = %q, want %q", name, got, want)
		}
	}
}

// Layouts from the MIG user guide's placement diagrams (A100 40GB names;
// the other models share the geometry under their own names).
func TestValidate(t *testing.T) {
	m, _ := Lookup("A100-SXM4-40GB")
	in := func(spec string) []Instance {
		var out []Instance
		for _, f := range strings.Fields(spec) {
			p, s, _ := strings.Cut(f, "@")
			out = append(out, Instance{Profile: p, Start: int(s[0] - '0')})
		}
		return out
	}
	for _, c := range []struct {
		layout string
		ok     bool
	}{
		{"7g.40gb@0", true},
		{"4g.20gb@0 3g.20gb@4", true},
		{"3g.20gb@0 3g.20gb@4", true},
		{"4g.20gb@0 2g.10gb@4 1g.5gb@6", true},
		{"2g.10gb@0 2g.10gb@2 3g.20gb@4", true},
		{"2g.10gb@0 1g.5gb@2 1g.5gb@3 3g.20gb@4", true},
		{"1g.5gb@0 1g.5gb@1 1g.5gb@2 1g.5gb@3 1g.5gb@4 1g.5gb@5 1g.5gb@6", true},
		{"1g.10gb@0 1g.10gb@2 1g.10gb@4 1g.10gb@6", true},
		{"2g.10gb@0 2g.10gb@2 2g.10gb@4 1g.5gb@6", true},
		{"1g.5gb@7", false},            // no 1g start on the eighth memory slice
		{"3g.20gb@2", false},           // 3g starts at 0 or 4 only
		{"4g.20gb@4", false},           // 4g starts at 0 only
		{"4g.20gb@0 3g.20gb@0", false}, // overlap
		{"3g.20gb@0 3g.20gb@4 1g.5gb@6", false},
		{"7g.40gb@0 1g.5gb@0", false},
		{"2g.10gb@0 2g.10gb@2 2g.10gb@4 1g.10gb@6 1g.5gb@7", false},
		{"5g.25gb@0", false},
	} {
		err := m.Validate(in(c.layout))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.layout, err, c.ok)
		}
	}
}

// Place must find a placement exactly when one exists: checked against
// every placement of every multiset of up to 7 profiles. The models share
// one geometry under their own names (checked first), so one model stands
// for all in the exhaustive part.
func TestPlaceAgreesWithValidate(t *testing.T) {
	ref := Models()[0]
	for _, m := range Models() {
		if m.ComputeSlices != ref.ComputeSlices || m.MemorySlices != ref.MemorySlices || len(m.Profiles) != len(ref.Profiles) {
			t.Fatalf("%s: geometry differs from %s", m.Key, ref.Key)
		}
		for i, p := range m.Profiles {
			r := ref.Profiles[i]
			if p.Compute != r.Compute || p.Memory != r.Memory || fmt.Sprint(p.Starts) != fmt.Sprint(r.Starts) {
				t.Fatalf("%s %s: slices or starts differ from %s %s", m.Key, p.Name, ref.Key, r.Name)
			}
		}
	}
	for _, m := range []*Model{ref} {
		var names []string
		for _, p := range m.Profiles {
			names = append(names, p.Name)
		}
		var rec func(start int, cur []string)
		rec = func(start int, cur []string) {
			if len(cur) > 0 {
				layout, ok := m.Place(cur)
				exists := anyPlacement(m, cur)
				if ok != exists {
					t.Fatalf("%s %v: Place %v, exhaustive %v", m.Key, cur, ok, exists)
				}
				if ok {
					if err := m.Validate(layout); err != nil {
						t.Fatalf("%s %v: Place proposed %v: %v", m.Key, cur, layout, err)
					}
				}
			}
			if len(cur) == 7 {
				return
			}
			for i := start; i < len(names); i++ {
				rec(i, append(append([]string(nil), cur...), names[i]))
			}
		}
		rec(0, nil)
	}
}

// anyPlacement tries every start of every instance, cutting a branch as
// soon as two instances share a memory slice; Validate judges each
// complete layout.
func anyPlacement(m *Model, profiles []string) bool {
	layout := make([]Instance, len(profiles))
	used := make([]bool, m.MemorySlices)
	var try func(k int) bool
	try = func(k int) bool {
		if k == len(profiles) {
			return m.Validate(layout) == nil
		}
		p, _ := m.Profile(profiles[k])
	starts:
		for _, s := range p.Starts {
			for j := s; j < s+p.Memory; j++ {
				if used[j] {
					continue starts
				}
			}
			for j := s; j < s+p.Memory; j++ {
				used[j] = true
			}
			layout[k] = Instance{Profile: p.Name, Start: s}
			ok := try(k + 1)
			for j := s; j < s+p.Memory; j++ {
				used[j] = false
			}
			if ok {
				return true
			}
		}
		return false
	}
	return try(0)
}

func TestFit(t *testing.T) {
	m, _ := Lookup("NVIDIA H100 80GB HBM3")
	for _, c := range []struct {
		compute, memGiB float64
		want            string
	}{
		{0.1, 6, "1g.10gb"},
		{0.1, 12, "1g.20gb"},
		{0.2, 12, "2g.20gb"},
		{0.4, 30, "3g.40gb"},
		{0.5, 30, "4g.40gb"},
		{0.5, 45, ""}, // more memory than 4g.40gb: the whole GPU
		{0.9, 5, ""},
	} {
		p, ok := m.Fit(c.compute, c.memGiB*1024)
		got := ""
		if ok {
			got = p.Name
		}
		if got != c.want {
			t.Errorf("Fit(%g, %g GiB) = %q, want %q", c.compute, c.memGiB, got, c.want)
		}
	}
	if s, ok := Smaller(m, 30*1024); !ok || s.Key != "A100-40GB" {
		t.Errorf("Smaller(H100, 30 GiB) = %v, %v; want A100-40GB", s, ok)
	}
	if _, ok := Smaller(m, 60*1024); ok {
		t.Error("Smaller(H100, 60 GiB): no smaller model holds it")
	}
}
