package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		{"bad web config", []string{"exporter", "--source=sim", "--web.config.file=" + badWeb}, 2, []string{"web.config.file", badWeb, "line 4", "bogus_key"}},
		{"missing web config", []string{"exporter", "--source=sim", "--web.config.file=" + filepath.Join(dir, "absent.yml")}, 2, []string{"absent.yml"}},
		{"no driver", []string{"exporter", "--source=auto", "--web.listen-address=127.0.0.1:0"}, 2, []string{"libnvidia-ml.so.1", "--source=sim"}},
		{"bad scenario", []string{"exporter", "--source=sim", "--sim.scenario=" + badScenario, "--web.listen-address=127.0.0.1:0"}, 2, []string{"scenario.yaml", "3", "not_a_key"}},
		{"unknown sim node", []string{"exporter", "--source=sim", "--sim.node=nope", "--web.listen-address=127.0.0.1:0"}, 2, []string{"--sim.node", "nope"}},
		{"scenario without sim", []string{"exporter", "--sim.scenario=" + badScenario}, 2, []string{"--source=sim"}},
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
