package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

// examplePolicy is the shipped example, a valid policy.
var examplePolicy = filepath.Join("..", "..", "deploy", "examples", "policy.yaml")

func TestExitCodesAndMessages(t *testing.T) {
	dir := t.TempDir()
	badWeb := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(badWeb, []byte("tls_server_config:\n  cert_file: /nonexistent.crt\n  key_file: /nonexistent.key\nbogus_key: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badScenario := filepath.Join(dir, "scenario.yaml")
	if err := os.WriteFile(badScenario, []byte("name: bad\nfleet:\n  - {hostnames: [n1], model: A100-SXM4-80GB, gpus: 8, not_a_key: 3}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want int
		msgs []string
	}{
		{"unknown flag", []string{"exporter", "--no-such-flag"}, 2, []string{"no-such-flag"}},
		{"bad source", []string{"exporter", "--source=gpu"}, 2, []string{"source"}},
		{"bad duration", []string{"exporter", "--collect-interval=soon"}, 2, []string{"collect-interval"}},
		{"tiny interval", []string{"exporter", "--source=sim", "--collect-interval=1ms"}, 2, []string{"--collect-interval must be at least"}},
		{"bad web config", []string{"exporter", "--source=sim", "--web.config.file=" + badWeb}, 2, []string{"--web.config.file", badWeb + ":4: bogus_key: unknown key"}},
		{"missing web config", []string{"exporter", "--source=sim", "--web.config.file=" + filepath.Join(dir, "absent.yml")}, 2, []string{"absent.yml"}},
		{"no driver", []string{"exporter", "--source=auto", "--web.listen-address=127.0.0.1:0"}, 2, []string{"libnvidia-ml.so.1", "--source=sim"}},
		{"bad scenario", []string{"exporter", "--source=sim", "--sim.scenario=" + badScenario, "--web.listen-address=127.0.0.1:0"}, 2, []string{"scenario.yaml", "3", "not_a_key"}},
		{"unknown sim node", []string{"exporter", "--source=sim", "--sim.node=nope", "--web.listen-address=127.0.0.1:0"}, 2, []string{"--sim.node", "nope"}},
		{"scenario without sim", []string{"exporter", "--sim.scenario=" + badScenario}, 2, []string{"--source=sim"}},
		{"@every 0s", []string{"analyzer", "--policy.file", examplePolicy, "--storage.path", filepath.Join(dir, "a.db"), "--schedule", "@every 0s"}, 2, []string{"--schedule", "at least 1s"}},
		{"@every -1s", []string{"analyzer", "--policy.file", examplePolicy, "--storage.path", filepath.Join(dir, "a.db"), "--schedule=@every -1s"}, 2, []string{"--schedule", "at least 1s"}},
		{"negative command timeout", []string{"analyzer", "--policy.file", examplePolicy, "--command.timeout=-1s"}, 2, []string{"--command.timeout must be positive"}},
		{"slurm cluster with a space", []string{"analyzer", "--policy.file", examplePolicy, "--slurm.cluster=a b"}, 2, []string{"--slurm.cluster", "not a Slurm cluster name"}},
		{"slurm cluster as an option", []string{"analyzer", "--policy.file", examplePolicy, "--slurm.cluster=--all"}, 2, []string{"--slurm.cluster", "not a Slurm cluster name"}},
		{"slurm cluster too long", []string{"analyzer", "--policy.file", examplePolicy, "--slurm.cluster=" + strings.Repeat("c", 64)}, 2, []string{"--slurm.cluster"}},
		{"slurm cluster list", []string{"analyzer", "--policy.file", examplePolicy, "--slurm.cluster=a,b"}, 2, []string{"--slurm.cluster"}},
		{"hub without token", []string{"analyzer", "--policy.file", examplePolicy, "--jupyterhub.url=http://hub:8081"}, 2, []string{"--jupyterhub.token-file"}},
		{"hub without kubernetes", []string{"analyzer", "--policy.file", examplePolicy, "--jupyterhub.url=http://hub:8081", "--jupyterhub.token-file=" + examplePolicy}, 2, []string{"needs Kubernetes"}},
		{"hub url", []string{"analyzer", "--policy.file", examplePolicy, "--kubernetes.in-cluster", "--jupyterhub.url=hub:8081", "--jupyterhub.token-file=" + examplePolicy}, 2, []string{"--jupyterhub.url", "http(s)"}},
		{"negative retention", []string{"agent", "--tsdb.retention=-1h"}, 2, []string{"--tsdb.retention"}},
		{"zero store interval", []string{"agent", "--tsdb.interval=0s"}, 2, []string{"--tsdb.interval must be at least 1s"}},
		{"zero store interval, old spelling", []string{"agent", "--storage.interval=0s"}, 2, []string{"--tsdb.interval must be at least 1s"}},
		{"year zero", []string{"report", "--week=0000-W01"}, 2, []string{"--week", "before 1970"}},
		{"negative limit", []string{"audit", "--limit=-1"}, 2, []string{"--limit"}},
		{"a century of demo", []string{"demo", "--length=876000h"}, 2, []string{"--length", "at most"}},
		{"unknown command", []string{"frobnicate"}, 2, []string{"frobnicate"}},
		{"no command", nil, 2, []string{"usage: gpuwatch"}},
		{"help", []string{"exporter", "--help"}, 0, []string{"--collect-interval"}},
		{"version", []string{"--version"}, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(tc.args, &stderr); got != tc.want {
				t.Fatalf("exit %d, want %d; stderr: %s", got, tc.want, stderr.String())
			}
			for _, m := range tc.msgs {
				if !strings.Contains(stderr.String(), m) {
					t.Errorf("stderr lacks %q: %s", m, stderr.String())
				}
			}
		})
	}
}

func TestHelpTeaches(t *testing.T) {
	var stderr bytes.Buffer
	run([]string{"help", "exporter"}, &stderr)
	for _, f := range []string{"--web.listen-address", "--web.config.file", "--collect-interval", "--source", "--sim.scenario", "--sim.seed"} {
		if !strings.Contains(stderr.String(), f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

// TestCLIDocCurrent keeps docs/cli.md in step with the flags.
func TestCLIDocCurrent(t *testing.T) {
	var b bytes.Buffer
	newApp(&bytes.Buffer{}).WriteDoc(&b)
	const path = "../../docs/cli.md"
	got, _ := os.ReadFile(path)
	if string(got) == b.String() {
		return
	}
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date; run UPDATE_DOCS=1 go test ./cmd/gpuwatch", path)
}

// TestOldSpellingsHidden: every retired flag name is hidden and its current
// spelling is shown, so --help teaches one spelling per flag.
func TestOldSpellingsHidden(t *testing.T) {
	app := newApp(io.Discard)
	tests := []struct{ command, old, current string }{
		{"analyze", "config", "analyzer.config"},
		{"job", "config", "analyzer.config"},
		{"agent", "config", "analyzer.config"},
		{"check-config", "config", "analyzer.config"},
		{"check-config", "policy", "policy.file"},
		{"report", "config", "report.config"},
		{"demo", "seed", "sim.seed"},
		{"demo", "scenario", "sim.scenario"},
		{"agent", "storage.interval", "tsdb.interval"},
		{"agent", "storage.retention", "tsdb.retention"},
	}
	for _, tc := range tests {
		cmd := app.GetCommand(tc.command)
		if cmd == nil {
			t.Fatalf("no command %s", tc.command)
		}
		flags := map[string]*kingpin.FlagModel{}
		for _, f := range cmd.Model().Flags {
			flags[f.Name] = f
		}
		if f := flags[tc.old]; f == nil || !f.Hidden {
			t.Errorf("%s --%s: want a hidden alias, got %+v", tc.command, tc.old, f)
		}
		if f := flags[tc.current]; f == nil || f.Hidden {
			t.Errorf("%s --%s: want a shown flag, got %+v", tc.command, tc.current, f)
		}
	}
	// The same option must not be spelled two ways across commands.
	retired := map[string]bool{}
	for _, tc := range tests {
		retired[tc.old] = true
	}
	for _, c := range app.Model().Commands {
		for _, f := range c.Flags {
			if !f.Hidden && retired[f.Name] {
				t.Errorf("%s shows the retired spelling --%s (see the table above for the current one)", c.FullCommand, f.Name)
			}
		}
	}
}
