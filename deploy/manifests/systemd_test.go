package manifests

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

var units = map[string]string{ // unit file -> gpuwatch subcommand
	"gpuwatch-exporter.service": "exporter",
	"gpuwatch-analyzer.service": "analyzer",
}

// unitFile is a parsed systemd unit: section -> key -> values (keys repeat).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, p string) unitFile {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", p, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// TestUnitsAreHardened parses the units and checks the options that keep the
// services least-privileged; it runs everywhere, systemd or not.
func TestUnitsAreHardened(t *testing.T) {
	env, err := os.ReadFile("../systemd/gpuwatch.env.example")
	if err != nil {
		t.Fatal(err)
	}
	for file, sub := range units {
		t.Run(file, func(t *testing.T) {
			u := parseUnit(t, filepath.Join("../systemd", file))
			svc := u["Service"]
			exec := strings.Fields(strings.Join(svc["ExecStart"], " "))
			if len(exec) < 2 || exec[0] != "/usr/local/bin/gpuwatch" || exec[1] != sub {
				t.Errorf("ExecStart %v, want /usr/local/bin/gpuwatch %s ...", exec, sub)
			}
			// Each $VAR the command line uses is set in the example env file.
			for _, m := range regexp.MustCompile(`\$\{?([A-Z_]+)`).FindAllStringSubmatch(strings.Join(exec, " "), -1) {
				if !strings.Contains(string(env), "\n"+m[1]+"=") {
					t.Errorf("ExecStart uses $%s, which gpuwatch.env.example does not set", m[1])
				}
			}
			want := map[string]string{
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
				"CapabilityBoundingSet": "", "AmbientCapabilities": "", "RestrictSUIDSGID": "yes",
				"SystemCallFilter": "@system-service", "Restart": "on-failure",
				"ProtectKernelModules": "yes", "ProtectKernelTunables": "yes", "MemoryDenyWriteExecute": "yes",
			}
			for k, v := range want {
				if got := svc[k]; len(got) != 1 || got[0] != v {
					t.Errorf("[Service] %s=%v, want %q", k, got, v)
				}
			}
			if got := u["Install"]["WantedBy"]; len(got) != 1 || got[0] != "multi-user.target" {
				t.Errorf("[Install] WantedBy=%v", got)
			}
			switch sub {
			case "analyzer":
				if svc["DynamicUser"][0] != "yes" || len(svc["LoadCredential"]) != 1 ||
					!strings.HasPrefix(svc["LoadCredential"][0], "smtp-password:") {
					t.Error("analyzer: runs as a dynamic user and gets the SMTP password as a credential")
				}
				if strings.Contains(string(env), "password=") || strings.Contains(string(env), "PASSWORD") {
					t.Error("a password in the environment file")
				}
			case "exporter":
				if svc["DevicePolicy"][0] != "closed" || len(svc["DeviceAllow"]) == 0 {
					t.Error("exporter: devices closed except the NVIDIA ones")
				}
			}
		})
	}
}

// TestUnitsVerify runs systemd-analyze verify on copies whose ExecStart points
// at a stand-in executable (verify insists the binary exists). Any warning
// about the unit (an unknown or misspelt key) fails the test.
func TestUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		testtool.Missing(t, "systemd-analyze not installed; .ci/run installs it (Debian package systemd)")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gpuwatch")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for file := range units {
		data, err := os.ReadFile(filepath.Join("../systemd", file))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, file)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(data), "/usr/local/bin/gpuwatch", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(sa, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("systemd-analyze: %s", line)
		}
	}
}
