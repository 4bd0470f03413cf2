package slurm

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestExpandHostlist holds Slurm's host list forms and hostile ones: each
// either expands to exactly the nodes Slurm means or is refused with
// ErrInvalid, never partly read and never expanded beyond MaxHosts.
func TestExpandHostlist(t *testing.T) {
	for _, c := range []struct {
		list string
		want string // names joined by " "; "" with bad for a refusal
		bad  bool
	}{
		// What Slurm prints.
		{list: "", want: ""},
		{list: "vm", want: "vm"},
		{list: "gpu[01-04,07]", want: "gpu01 gpu02 gpu03 gpu04 gpu07"},
		{list: "gpu[1-3]", want: "gpu1 gpu2 gpu3"},
		{list: "gpu[8-10]", want: "gpu8 gpu9 gpu10"},
		{list: "gpu[098-101]", want: "gpu098 gpu099 gpu100 gpu101"},
		{list: "n[1-2],login1", want: "n1 n2 login1"},
		{list: "a,b,c", want: "a b c"},
		{list: "r[1-2]n[1-2]", want: "r1n1 r1n2 r2n1 r2n2"},
		{list: "gpu[1-2]-ib", want: "gpu1-ib gpu2-ib"},
		{list: "gpu[5]", want: "gpu5"},
		{list: "gpu[0-0]", want: "gpu0"},
		{list: "[1-3]", want: "1 2 3"},
		{list: "n.example[1-2]", want: "n.example1 n.example2"},
		{list: "n[1,1]", want: "n1 n1"},
		{list: "n[0-65535]", want: ""}, // checked by count below
		// Hostile or broken: refused.
		{list: "n[0-99999999]", bad: true},
		{list: "n[0-999999999]", bad: true},
		{list: "n[0-9999999999]", bad: true},
		{list: "n[0-65536]", bad: true},
		{list: "n[0-300]m[0-300]", bad: true},
		{list: "a[0-9]b[0-9]c[0-9]d[0-9]e[0-9]f[0-9]", bad: true},
		{list: "n[0-40000],m[0-40000]", bad: true},
		{list: "n[0-30000,0-30000,0-30000]", bad: true},
		{list: "n[4-1]", bad: true},
		{list: "n[1-]", bad: true},
		{list: "n[-1]", bad: true},
		{list: "n[1--2]", bad: true},
		{list: "n[a-b]", bad: true},
		{list: "n[1-2", bad: true},
		{list: "n1-2]", bad: true},
		{list: "n][1", bad: true},
		{list: "n[[1-2]]", bad: true},
		{list: "n[]", bad: true},
		{list: "n[,]", bad: true},
		{list: "n[1,]", bad: true},
		{list: "n[+1-2]", bad: true},
		{list: "n[0x1-0x2]", bad: true},
		{list: "n[１-２]", bad: true},
		{list: "a,,b", bad: true},
		{list: ",a", bad: true},
		{list: "a,", bad: true},
		{list: "a b", bad: true},
		{list: "a;rm -rf /", bad: true},
		{list: "a\nb", bad: true},
		{list: "-a", bad: true},
		{list: "n[1-2]$(id)", bad: true},
		{list: "a\x00b", bad: true},
		{list: strings.Repeat("n", 64), bad: true},
		{list: strings.Repeat("a,", MaxHostlistBytes/2) + "a", bad: true},
		{list: "n[" + strings.Repeat("1,", 40000) + "1]", bad: true},
		{list: "n[1-2]" + strings.Repeat("x", 62), bad: true},
	} {
		got, err := ExpandHostlist(c.list)
		if c.bad {
			if err == nil || !errors.Is(err, ErrInvalid) {
				t.Errorf("ExpandHostlist(%q) = %d names, %v; want ErrInvalid", clip(c.list), len(got), err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ExpandHostlist(%q): %v", c.list, err)
			continue
		}
		if c.list == "n[0-65535]" {
			if len(got) != MaxHosts || got[0] != "n0" || got[MaxHosts-1] != "n65535" {
				t.Errorf("n[0-65535]: %d names, want %d", len(got), MaxHosts)
			}
			continue
		}
		if s := strings.Join(got, " "); s != c.want {
			t.Errorf("ExpandHostlist(%q) = %q, want %q", c.list, s, c.want)
		}
	}
}

// TestExpandHostlistRefusesBeforeAllocating: a hostile range is refused
// from its text, before memory is spent on names.
func TestExpandHostlistRefusesBeforeAllocating(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := ExpandHostlist("n[0-99999999]x[0-99999999]"); err == nil {
			t.Fatal("hostile host list expanded")
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing 100 hostile lists allocated %d bytes", grew)
	}
}
