package health

import "testing"

// TestXIDOwners: the codes the issue names, as NVIDIA's XID catalogue
// attributes them; an unknown code is blamed on no one.
func TestXIDOwners(t *testing.T) {
	for _, c := range []int{48, 63, 64, 74, 79, 92, 94, 95} {
		if x := XID(c); x.Owner != OwnerHardware || !x.NotTheJobs() {
			t.Errorf("XID %d: %+v, want hardware", c, x)
		}
	}
	for _, c := range []int{13, 31, 43, 45} {
		if x := XID(c); x.Owner != OwnerApplication || x.NotTheJobs() {
			t.Errorf("XID %d: %+v, want the application's", c, x)
		}
	}
	if x := XID(9999); x.Owner != OwnerUnknown || x.NotTheJobs() {
		t.Errorf("unknown XID: %+v", x)
	}
	seen := map[int]bool{}
	for _, x := range XIDs() {
		if seen[x.Code] || x.Meaning == "" {
			t.Errorf("catalogue entry %+v duplicated or without meaning", x)
		}
		seen[x.Code] = true
	}
}
