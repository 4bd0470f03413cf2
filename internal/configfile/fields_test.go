package configfile

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

type fields struct {
	Wait    Duration `yaml:"wait"`
	Delay   Delay    `yaml:"delay"`
	Count   Count    `yaml:"count"`
	Hours   Amount   `yaml:"hours"`
	Until   Time     `yaml:"until"`
	Users   []Glob   `yaml:"users"`
	URL     HTTPURL  `yaml:"url"`
	Colour  colour   `yaml:"colour"`
	Comment string   `yaml:"comment"`
}

type colour string

func (c *colour) UnmarshalYAML(n *yaml.Node) error { return OneOf(n, c, "colour", "red", "green") }

// TestFieldsDecodeGood: each type turns the file's text into its value,
// and a key left out keeps the default it was decoded over.
func TestFieldsDecodeGood(t *testing.T) {
	f := fields{Count: 7, Comment: "default"}
	_, err := Decode("f", []byte("wait: 1d\ndelay: 0s\nhours: 2.5\nuntil: 2026-12-31T00:00:00Z\nusers: [alice, 'ml-*']\nurl: https://am:9093/\ncolour: green\n"), &f)
	if err != nil {
		t.Fatal(err)
	}
	until, _ := time.Parse(time.RFC3339, "2026-12-31T00:00:00Z")
	if f.Wait.D() != 24*time.Hour || f.Delay.D() != 0 || f.Count != 7 || f.Hours != 2.5 || !f.Until.T().Equal(until) ||
		strings.Join(Globs(f.Users), ",") != "alice,ml-*" || f.URL != "https://am:9093/" || f.Colour != "green" || f.Comment != "default" {
		t.Errorf("decoded %+v", f)
	}
}

// TestFieldsRefuseBadValues: every bad value of one file is reported in
// one pass, each at its own line and key.
func TestFieldsRefuseBadValues(t *testing.T) {
	doc := strings.Join([]string{
		"wait: 0s",
		"delay: -5m",
		"count: -1",
		"hours: -2",
		"until: tomorrow",
		"users: ['[x']",
		"url: ftp://host/x",
		"colour: blue",
		"comment: fine",
	}, "\n")
	_, err := Decode("f", []byte(doc), &fields{})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %T %v, want Errors", err, err)
	}
	want := []string{
		`f:1: wait: duration "0s" must be positive`,
		`f:2: delay: duration "-5m" must not be negative`,
		`f:3: count: must be zero or more, got -1`,
		`f:4: hours: must be zero or more and finite, got -2`,
		`f:5: until: invalid time "tomorrow" (use RFC 3339`,
		`f:6: users[0]: invalid pattern "[x"`,
		`f:7: url: must be an absolute http(s) URL, got "ftp://host"`,
		`f:8: colour: unknown colour "blue" (one of red, green)`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i], w)
		}
	}
}

// TestFieldsRefuseWrongShapes: a map or list where a scalar belongs is
// named as such, not decoded into something.
func TestFieldsRefuseWrongShapes(t *testing.T) {
	for _, doc := range []string{"wait: {a: 1}", "delay: [1s]", "count: {a: 1}", "hours: [1]", "until: [x]", "users: [{a: b}]", "url: [x]", "colour: {a: b}"} {
		if _, err := Decode("f", []byte(doc), &fields{}); err == nil || !strings.Contains(err.Error(), "f:1: ") {
			t.Errorf("%s: error %v, want one at f:1", doc, err)
		}
	}
}
