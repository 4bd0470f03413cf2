package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, yaml string
		check      func(t *testing.T, c Config)
		err        string // substring; "" = no error
	}{
		{name: "empty keeps defaults", yaml: "", check: func(t *testing.T, c Config) {
			if c.Patterns.CPUOnly.MinDuration.D() != 2*time.Hour || c.Step.D() != 5*time.Minute {
				t.Errorf("defaults lost: %+v", c)
			}
		}},
		{name: "override one pattern", yaml: "patterns:\n  cpu_only:\n    min_duration: 90m\n  idle_session:\n    disabled: true\n",
			check: func(t *testing.T, c Config) {
				if c.Patterns.CPUOnly.MinDuration.D() != 90*time.Minute {
					t.Errorf("cpu_only.min_duration = %s", c.Patterns.CPUOnly.MinDuration)
				}
				if !c.Patterns.IdleSession.Disabled || c.Patterns.Stuck.Disabled {
					t.Errorf("disabled flags wrong: %+v", c.Patterns)
				}
				if c.Patterns.Stuck.IdleDuration.D() != time.Hour {
					t.Errorf("untouched stuck lost its default")
				}
			}},
		{name: "max_runtime has no built-in limit", yaml: "patterns:\n  overlong:\n    max_runtime:\n      service: 30d\n",
			check: func(t *testing.T, c Config) {
				m := c.Patterns.Overlong.MaxRuntime
				if m["service"].D() != 30*24*time.Hour || len(m) != 1 {
					t.Errorf("max_runtime = %v", m)
				}
			}},
		{name: "unknown key names its line", yaml: "step: 5m\npatterns:\n  cpu_only:\n    min_duraton: 1h\n", err: "t.yaml:4: patterns.cpu_only.min_duraton: unknown key \"min_duraton\" (did you mean \"min_duration\"?)"},
		{name: "bad duration names its line", yaml: "patterns:\n  stuck:\n    idle_duration: soon\n", err: "t.yaml:3: patterns.stuck.idle_duration: duration \"soon\""},
		{name: "negative duration", yaml: "step: -5m\n", err: "t.yaml:1: step:"},
		{name: "ratio out of range", yaml: "idle:\n  power_veto_above_floor: 1.5\n", err: "t.yaml:2: idle.power_veto_above_floor: 1.5 is not a ratio"},
		{name: "retired power_veto_ratio says what replaced it", yaml: "idle:\n  power_veto_ratio: 0.4\n",
			err: "t.yaml:2: idle.power_veto_ratio: retired: power is no longer judged as one share of the power limit for every part"},
		{name: "floor quantile 0 refused", yaml: "idle:\n  floor_quantile: 0\n", err: "t.yaml:2: idle.floor_quantile: must be above 0"},
		{name: "floor min samples 0 refused", yaml: "idle:\n  floor_min_samples: 0\n", err: "t.yaml:2: idle.floor_min_samples: 0: must be at least 1"},
		{name: "percent out of range", yaml: "idle:\n  util_percent: 120\n", err: "t.yaml:2: idle.util_percent:"},
		{name: "step too short", yaml: "step: 10s\n", err: "t.yaml:1: step: 10s: must be at least 30s"},
		{name: "zero coverage", yaml: "min_coverage: 0\n", err: "t.yaml:1: min_coverage: must be above 0"},
		{name: "wrong type", yaml: "patterns: [1, 2]\n", err: "t.yaml:1: patterns: cannot unmarshal !!seq"},
		{name: "NaN refused", yaml: "min_coverage: .nan\nidle:\n  power_veto_above_floor: .nan\n", err: "t.yaml:3: idle.power_veto_above_floor: .nan is not a number"},
		{name: "second document", yaml: "step: 5m\n---\nstep: 1h\n", err: "t.yaml:2: more than one YAML document"},
		{name: "every error collected", yaml: "stpe: 5m\nidle:\n  utl_percent: 3\n", err: "t.yaml:1: stpe: unknown key \"stpe\" (did you mean \"step\"?)\nt.yaml:3: idle.utl_percent"},
		{name: "days and weeks", yaml: "patterns:\n  overlong:\n    max_runtime:\n      service: 2w\n      batch: 1d12h\n", check: func(t *testing.T, c Config) {
			if m := c.Patterns.Overlong.MaxRuntime; m["service"].D() != 14*24*time.Hour || m["batch"].D() != 36*time.Hour {
				t.Errorf("max_runtime = %v", m)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", []byte(c.yaml))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "t.yaml") {
					t.Fatalf("error %v, want one containing %q and the file name", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, cfg)
		})
	}
}

// The shipped example documents the defaults: it must parse and equal them.
func TestExampleIsDefaults(t *testing.T) {
	c, err := Load("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, Default()) {
		t.Errorf("example.yaml differs from Default():\n%+v\n%+v", c, Default())
	}
}
