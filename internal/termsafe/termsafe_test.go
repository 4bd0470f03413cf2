package termsafe

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"train-resnet", "train-resnet"},
		{"训练 job ü", "训练 job ü"},
		{"\x1b[2J\x1b[Hfake", `\x1b[2J\x1b[Hfake`},
		{"a\nTIME STEP forged row", `a\nTIME STEP forged row`},
		{"a\tb\rc", `a\tb\rc`},
		{"del\x7f c1\u009b", `del\x7f c1\u009b`},
		{"rtl \u202etxt.exe", `rtl \u202etxt.exe`},
		{`already \x1b`, `already \\x1b`},
		{"bad \xff byte", `bad \xff byte`},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzString: whatever goes in, nothing a terminal acts on comes out.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "\x1b]0;title\x07", "a\nb", "\u202e", "\xff\xfe", `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := String(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q", s)
		}
		for _, r := range out {
			if unsafe(r) {
				t.Fatalf("String(%q) = %q keeps %U", s, out, r)
			}
		}
	})
}

// TestBound: a name over the bound is cut at a character boundary, says
// how long it was, and never exceeds the bound; one within it is kept.
func TestBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"alice", MaxName, "alice"},
		{strings.Repeat("a", MaxName), MaxName, strings.Repeat("a", MaxName)},
		{strings.Repeat("a", MaxName+1), MaxName, strings.Repeat("a", MaxName-len("…(257 bytes)")) + "…(257 bytes)"},
		{strings.Repeat("é", 200), 20, "ééé…(400 bytes)"}, {strings.Repeat("é", 200), 21, "ééé…(400 bytes)"},
		{strings.Repeat("x", 1<<20), 8, "…(1048576 bytes)"},
	} {
		got := Bound(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("Bound(%.20q…, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if tc.max >= 20 && len(got) > tc.max {
			t.Errorf("Bound(%.20q…, %d) is %d bytes", tc.in, tc.max, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("Bound(%.20q…) cut a character: %q", tc.in, got)
		}
	}
}
