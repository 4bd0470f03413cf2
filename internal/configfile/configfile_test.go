package configfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

type inner struct {
	Ratio float64  `yaml:"ratio"`
	Wait  Duration `yaml:"wait"`
}

type target struct {
	Name    string           `yaml:"name"`
	Price   float64          `yaml:"price"`
	Inner   inner            `yaml:"inner"`
	Tiers   []inner          `yaml:"tiers"`
	Labels  map[string]inner `yaml:"labels"`
	Enabled bool             `yaml:"enabled"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // substrings, each of its own error line
	}{
		{"valid", "name: a\nprice: 1.5\ninner: {ratio: 0.5, wait: 1d}\ntiers:\n  - wait: 2w\nlabels:\n  x: {ratio: 1}\n", nil},
		{"empty", "", nil},
		{"unknown keys, all of them, with suggestions", "nmae: a\ninner:\n  ratoi: 1\ntiers:\n  - wiat: 1h\n",
			[]string{`f:1: nmae: unknown key "nmae" (did you mean "name"?)`, `f:3: inner.ratoi: unknown key "ratoi" (did you mean "ratio"?)`, `f:5: tiers[0].wiat: unknown key "wiat" (did you mean "wait"?)`}},
		{"NaN and infinities", "price: .nan\ninner:\n  ratio: -.Inf\nlabels:\n  a: {ratio: .INF}\n",
			[]string{"f:1: price: .nan is not a number", "f:3: inner.ratio: -.Inf is not a number", "f:5: labels.a.ratio: .INF is not a number"}},
		{"second document", "name: a\n---\nname: b\n", []string{"f:2: more than one YAML document"}},
		{"type errors collected", "price: cheap\nenabled: maybe\n", []string{"f:1: price: cannot unmarshal", "f:2: enabled: cannot unmarshal"}},
		{"bad duration", "inner:\n  wait: 1 fortnight\n", []string{"f:2: inner.wait: duration \"1 fortnight\""}},
		{"negative duration", "inner:\n  wait: -1h\n", []string{"f:2: inner.wait:"}},
		{"map as a value", "name: {weird: 1h}\n", []string{"f:1: name: cannot unmarshal !!map"}},
		{"syntax error", "name: [a\n", []string{"f:"}},
		// The scanner names the line where the value above began (2); the
		// tab is on line 3.
		{"tab in the indentation", "inner:\n  ratio: 1\n\twait: 1h\n", []string{"f:3: found a tab character that violates indentation (YAML indents with spaces only)"}},
		{"tab after spaces, further down", "name: a\ninner:\n  ratio: 1\n  \t wait: 1h\n", []string{"f:4: found a tab character"}},
		{"tab starting a line", "inner:\n\tratio: 1\n", []string{"f:2: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out target
			_, err := Decode("f", []byte(tc.in), &out)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if n := len(strings.Split(err.Error(), "\n")); n < len(tc.want) {
				t.Errorf("%d error lines, want %d:\n%v", n, len(tc.want), err)
			}
		})
	}
}

func TestDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"90s": 90 * time.Second, "1h30m": 90 * time.Minute, "1d": 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1d12h": 36 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
		if got, _ := ParseDuration(FormatDuration(want)); got != want {
			t.Errorf("round trip of %v gave %v", want, got)
		}
	}
	for _, bad := range []string{"", "1.5h", "1 h", "h", "1x", "-1h"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

// TestReadFileRefusesHostileFiles: /dev/zero, a FIFO nobody writes, a
// folder and an oversized file are refused at once, without reading them.
func TestReadFileRefusesHostileFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/dev/zero", fifo, dir, big, filepath.Join(dir, "absent")} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(p); done <- err }()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("ReadFile(%s) accepted", p)
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("ReadFile(%s) blocked", p)
		}
	}
}

// FuzzDecode: whatever the bytes, Decode returns (no panic, no hang), and
// every error it gives names the file.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"name: a\n", "price: .nan\n", "a: &x [*x]\n", "---\n---\n", "inner: {wait: 1d}\n", "tiers: [{ratio: 1e999}]\n", "<<: {name: a}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var out target
		_, err := Decode("fuzz.yaml", []byte(s), &out)
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz.yaml") {
			t.Fatalf("error without the file name: %v", err)
		}
	})
}

// TestRawNodeAcceptsAnyKey: a field kept as yaml.Node is the loader's to
// check (the policy's match keys), so any key below it decodes, while its
// siblings stay strict and NaN is refused even there.
func TestRawNodeAcceptsAnyKey(t *testing.T) {
	var v struct {
		Match map[string]yaml.Node `yaml:"match"`
		Name  string               `yaml:"name"`
	}
	if _, err := Decode("m.yml", []byte("match:\n  anything: {deep: [1]}\nname: x\n"), &v); err != nil || len(v.Match) != 1 {
		t.Fatalf("raw node: %v, %+v", err, v)
	}
	_, err := Decode("m.yml", []byte("match:\n  a: {b: .nan}\nnme: x\n"), &v)
	var one *Error
	if !errors.As(err, &one) {
		t.Fatalf("errors.As(%T) found no *Error", err)
	}
	for _, w := range []string{"m.yml:2: match.a.b: .nan", `m.yml:3: nme: unknown key "nme" (did you mean "name"?)`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}

// TestAliasBomb: nine nested levels of nine aliases (a billion nodes from
// a kilobyte) are refused at once, by every loader, while ordinary
// anchors still work.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	prev := "a"
	for _, l := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "%s: &%s [%s]\n", l, l, strings.TrimSuffix(strings.Repeat("*"+prev+",", 9), ","))
		prev = l
	}
	b.WriteString("top: *i\n")
	// CPU time, not wall time: a bomb expanded costs minutes of CPU, while
	// a busy machine only stretches the wall time of a refusal.
	cpu0 := testtool.CPUTime()
	var out any
	_, err := Decode("bomb.yaml", []byte(b.String()), &out)
	if err == nil || !strings.Contains(err.Error(), "aliases expand") {
		t.Fatalf("alias bomb: %v", err)
	}
	if took := testtool.CPUTime() - cpu0; took > time.Second {
		t.Fatalf("refusing the bomb took %s of CPU", took)
	}
	var ok struct {
		Base  map[string]string `yaml:"base"`
		Tiers []map[string]any  `yaml:"tiers"`
	}
	if _, err := Decode("anchors.yaml", []byte("base: &b {team: ml}\ntiers:\n  - match: *b\n  - match: *b\n"), &ok); err != nil || len(ok.Tiers) != 2 {
		t.Fatalf("ordinary anchors: %v %+v", err, ok)
	}
}
