package manifests

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/internal/testtool"
)

// units maps each unit file to the command line its ExecStart must begin
// with and the environment file (deploy/systemd/<unit>.default, installed as
// /etc/default/<unit>) that sets its arguments.
var units = map[string][]string{
	"gpuwatch-exporter.service": {"/usr/bin/gpuwatch-exporter"},
	"gpuwatch-analyzer.service": {"/usr/bin/gpuwatch-analyzer", "analyzer"},
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
	for file, cmd := range units {
		t.Run(file, func(t *testing.T) {
			name := strings.TrimSuffix(file, ".service")
			env, err := os.ReadFile(filepath.Join("../systemd", name+".default"))
			if err != nil {
				t.Fatal(err)
			}
			// A drop-in may set variables too (Environment=).
			var dropIn unitFile
			if _, err := os.Stat(filepath.Join("../systemd", name+"-reports.conf")); err == nil {
				dropIn = parseUnit(t, filepath.Join("../systemd", name+"-reports.conf"))
				for _, e := range dropIn["Service"]["Environment"] {
					env = append(env, "\n"+e+"\n"...)
				}
			}
			u := parseUnit(t, filepath.Join("../systemd", file))
			svc := u["Service"]
			exec := strings.Fields(strings.Join(svc["ExecStart"], " "))
			if len(exec) < len(cmd) || !reflect.DeepEqual(exec[:len(cmd)], cmd) {
				t.Errorf("ExecStart %v, want %v ...", exec, cmd)
			}
			if got := svc["EnvironmentFile"]; len(got) != 1 || got[0] != "/etc/default/"+name {
				t.Errorf("EnvironmentFile=%v, want /etc/default/%s (required: the packages install it)", got, name)
			}
			// Each $VAR the command line uses is set in the environment file.
			for _, m := range regexp.MustCompile(`\$\{?([A-Z_]+)`).FindAllStringSubmatch(strings.Join(exec, " "), -1) {
				if !regexp.MustCompile(`(?m)^` + m[1] + `=`).Match(env) {
					t.Errorf("ExecStart uses $%s, which %s.default does not set", m[1], name)
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
			switch name {
			case "gpuwatch-analyzer":
				if svc["DynamicUser"][0] != "yes" || svc["User"][0] != "gpuwatch" {
					t.Error("analyzer: runs as the gpuwatch system user, or a dynamic one")
				}
				// The unit starts without any secret (a dry-run trial); the
				// reports' drop-in brings the SMTP password as a credential.
				if len(svc["LoadCredential"]) != 0 {
					t.Errorf("analyzer: LoadCredential=%v fails the unit when the file is missing", svc["LoadCredential"])
				}
				if got := dropIn["Service"]["LoadCredential"]; len(got) != 1 || !strings.HasPrefix(got[0], "smtp-password:") {
					t.Errorf("reports drop-in: LoadCredential=%v, want the SMTP password", got)
				}
				if strings.Contains(string(env), "password=") || strings.Contains(string(env), "PASSWORD") {
					t.Error("a password in the environment file")
				}
			case "gpuwatch-exporter":
				if svc["DevicePolicy"][0] != "closed" || len(svc["DeviceAllow"]) == 0 {
					t.Error("exporter: devices closed except the NVIDIA ones")
				}
			}
		})
	}
}

// TestUnitsVerify installs the units as they are (no rewritten ExecStart)
// into a private root with a stand-in executable at each ExecStart path, and
// runs systemd-analyze verify --root there: any message about a unit (an
// unknown or misspelt key, a missing binary) fails the test. A missing
// systemd-analyze fails it with CI set. Which binary each install path puts
// there is tested with the real ones (build/packages, docs/install_test.go).
func TestUnitsVerify(t *testing.T) {
	root := testtool.SystemdRoot(t)
	unitDir := filepath.Join(root, "etc/systemd/system")
	var names []string
	for file, cmd := range units {
		bin := filepath.Join(root, cmd[0])
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		copyFile(t, filepath.Join("../systemd", file), filepath.Join(unitDir, file))
		names = append(names, file)
	}
	// The reports drop-in, where its comment says to install it.
	copyFile(t, "../systemd/gpuwatch-analyzer-reports.conf", filepath.Join(unitDir, "gpuwatch-analyzer.service.d", "reports.conf"))
	testtool.VerifyUnits(t, root, names...)
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
