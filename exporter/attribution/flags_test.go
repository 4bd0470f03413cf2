package attribution

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

func parseFlags(t *testing.T, args ...string) (*Flags, error) {
	t.Helper()
	app := kingpin.New("test", "")
	f := RegisterFlags(app)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	return f, f.Validate()
}

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	teamsFile := filepath.Join(dir, "teams.yml")
	if err := os.WriteFile(teamsFile, []byte("team: {users: {alice: ml}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	badTeams := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(badTeams, []byte("kinds:\n  - kind: batch\n    jobName: '('\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		args      []string
		wantErr   string
		kube      bool
		resources []string
	}{
		{"defaults: no socket, no kubelet", nil, "", false, nil},
		{"auto: socket exists", []string{"--kubernetes.pod-resources-socket=" + sock}, "", true,
			[]string{"nvidia.com/gpu", "nvidia.com/mig-*"}},
		{"explicitly off", []string{"--kubernetes.pod-resources-socket=" + sock, "--no-kubernetes.enable"}, "", false, nil},
		{"explicitly on without socket", []string{"--kubernetes.enable", "--kubernetes.pod-resources-socket=" + filepath.Join(dir, "none")}, "", true,
			[]string{"nvidia.com/gpu", "nvidia.com/mig-*"}},
		{"extra resources", []string{"--kubernetes.enable", "--kubernetes.resource-name=nvidia.com/gpu.shared", "--kubernetes.resource-name=example.com/accel-*"}, "", true,
			[]string{"nvidia.com/gpu", "nvidia.com/mig-*", "nvidia.com/gpu.shared", "example.com/accel-*"}},
		{"bad resource", []string{"--kubernetes.resource-name=a*b"}, "--kubernetes.resource-name", false, nil},
		{"interval too short", []string{"--kubernetes.refresh-interval=1ms"}, "--kubernetes.refresh-interval", false, nil},
		{"teams file", []string{"--attribution.teams-file=" + teamsFile}, "", false, nil},
		{"bad teams file", []string{"--attribution.teams-file=" + badTeams}, "bad.yml:3: kinds[0].job_name: bad pattern", false, nil},
		{"mapping dir is a file", []string{"--hpc-job-mapping-dir=" + teamsFile}, "is not a folder", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parseFlags(t, tc.args...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			o := f.Options(nil, source.SystemClock{}, nil, nil)
			if (o.Kubelet != nil) != tc.kube {
				t.Fatalf("kubelet enabled = %v, want %v", o.Kubelet != nil, tc.kube)
			}
			if tc.kube && !reflect.DeepEqual(o.Kubelet.ResourceNames, tc.resources) {
				t.Fatalf("resources = %v, want %v", o.Kubelet.ResourceNames, tc.resources)
			}
			if o.ProcRoot != "/proc" || o.CgroupRoot != "/sys/fs/cgroup" {
				t.Fatalf("roots = %q, %q", o.ProcRoot, o.CgroupRoot)
			}
			if strings.Contains(tc.name, "teams") {
				a := source.Allocation{User: "alice"}
				o.Teams.Apply(&a)
				if a.Team != "ml" {
					t.Fatalf("teams file not applied: %+v", a)
				}
			}
		})
	}
}
