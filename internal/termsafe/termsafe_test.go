package termsafe

import (
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
