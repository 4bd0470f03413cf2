package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	testUID = "0f2a4b9c-3d1e-4f5a-8b7c-6d5e4f3a2b1c"
	testCID = "3a9f1c2b7e4d5a6b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"
)

func TestOwnerFixtures(t *testing.T) {
	cases := []struct {
		file    string
		want    Owner // Path is checked through JobPath
		ok      bool
		jobPath string
	}{
		{"v2-containerd-systemd", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeContainerd, Version: 2}, true,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2a4b9c_3d1e_4f5a_8b7c_6d5e4f3a2b1c.slice"},
		{"v2-containerd-cgroupfs", Owner{PodUID: testUID, ContainerID: testCID, Version: 2}, true,
			"/kubepods/burstable/pod" + testUID},
		{"v2-crio-systemd", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeCRIO, Version: 2}, true,
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f2a4b9c_3d1e_4f5a_8b7c_6d5e4f3a2b1c.slice"},
		{"v2-crio-cgroupfs", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeCRIO, Version: 2}, true,
			"/kubepods/besteffort/pod" + testUID},
		{"v2-docker-k8s-systemd", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeDocker, Version: 2}, true,
			"/kubepods.slice/kubepods-pod0f2a4b9c_3d1e_4f5a_8b7c_6d5e4f3a2b1c.slice"},
		{"v2-docker-systemd", Owner{ContainerID: testCID, Runtime: RuntimeDocker, Version: 2}, true, ""},
		{"v2-docker-cgroupfs", Owner{ContainerID: testCID, Runtime: RuntimeDocker, Version: 2}, true, ""},
		{"v2-slurm", Owner{SlurmJob: "4242", Version: 2}, true, "/system.slice/slurmstepd.scope/job_4242"},
		{"v2-host", Owner{}, false, ""},
		{"v2-root", Owner{}, false, ""},
		{"v1-containerd-systemd", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeContainerd, Version: 1, Controller: "cpuacct"}, true,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2a4b9c_3d1e_4f5a_8b7c_6d5e4f3a2b1c.slice"},
		{"v1-containerd-cgroupfs", Owner{PodUID: testUID, ContainerID: testCID, Version: 1, Controller: "cpuacct"}, true,
			"/kubepods/burstable/pod" + testUID},
		{"v1-crio-systemd", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeCRIO, Version: 1, Controller: "cpuacct"}, true,
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f2a4b9c_3d1e_4f5a_8b7c_6d5e4f3a2b1c.slice"},
		{"v1-crio-cgroupfs", Owner{PodUID: testUID, ContainerID: testCID, Runtime: RuntimeCRIO, Version: 1, Controller: "cpuacct"}, true,
			"/kubepods/burstable/pod" + testUID},
		{"v1-docker-k8s-cgroupfs", Owner{PodUID: testUID, ContainerID: testCID, Version: 1, Controller: "cpuacct"}, true,
			"/kubepods/pod" + testUID},
		{"v1-docker-systemd", Owner{ContainerID: testCID, Runtime: RuntimeDocker, Version: 1, Controller: "cpuacct"}, true, ""},
		{"v1-docker-cgroupfs", Owner{ContainerID: testCID, Runtime: RuntimeDocker, Version: 1, Controller: "cpuacct"}, true, ""},
		{"v1-slurm", Owner{SlurmJob: "777", Version: 1, Controller: "cpuacct"}, true, "/slurm/uid_1000/job_777"},
		// Cut inside the path: parses, names no owner (the pod UID is incomplete).
		{"truncated-v2-path", Owner{}, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file+".cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Parse(data)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, ok := m.Owner()
			if ok != tc.ok {
				t.Fatalf("Owner ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			jp, _ := got.JobPath()
			if jp != tc.jobPath {
				t.Errorf("JobPath = %q, want %q", jp, tc.jobPath)
			}
			got.Path = ""
			if got != tc.want {
				t.Errorf("Owner = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		file, wantErr string
	}{
		{"truncated-v1", "line 3"},
		{"malformed-fields", "line 2"},
		{"malformed-id", "bad hierarchy id"},
		{"empty", "no cgroup lines"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file+".cgroup"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(data)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestPathOwnerRejectsLookalikes(t *testing.T) {
	for _, p := range []string{
		"/kubepods/burstable/podnot-a-uid/" + testCID,          // container still named, no pod
		"/system.slice/crio-conmon-" + testCID + ".scope",      // CRI-O's monitor
		"/user.slice/job_12",                                   // job_ outside slurm
		"/slurm/uid_0/job_12x",                                 // not a job id
		"/system.slice/docker-" + testCID[:63] + ".scope",      // short id
		"/kubepods.slice/kubepods-burstable.slice/unrelated-x", // no pod segment
	} {
		o, ok := PathOwner(p)
		if ok && (o.PodUID != "" || o.SlurmJob != "" || o.Runtime == RuntimeCRIO || (o.ContainerID != "" && !strings.HasPrefix(p, "/kubepods/burstable/podnot"))) {
			t.Errorf("PathOwner(%q) = %+v, want no pod, job or wrong container", p, o)
		}
	}
}

func TestCPUSeconds(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("system.slice/slurmstepd.scope/job_4242/cpu.stat", "usage_usec 12500000\nuser_usec 10000000\nsystem_usec 2500000\n")
	write("cpu,cpuacct/slurm/uid_1000/job_777/cpuacct.usage", "3250000000\n")
	write("kubepods/burstable/pod"+testUID+"/cpu.stat", "user_usec 1\nusage_usec 2000000\n")
	write("system.slice/slurmstepd.scope/job_9/cpu.stat", "usage_usec lots\n")
	c := CPU{Root: root}
	cases := []struct {
		name    string
		path    string
		version int
		want    float64
		wantErr string
	}{
		{"v2 slurm", "/system.slice/slurmstepd.scope/job_4242", 2, 12.5, ""},
		{"v1 slurm under cpu,cpuacct", "/slurm/uid_1000/job_777", 1, 3.25, ""},
		{"v2 pod", "/kubepods/burstable/pod" + testUID, 2, 2, ""},
		{"missing", "/slurm/uid_1/job_1", 1, 0, "no such file"},
		{"bad number", "/system.slice/slurmstepd.scope/job_9", 2, 0, "usage_usec"},
		{"escape attempt stays under root", "/../../etc", 2, 0, filepath.Join(root, "etc")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.Seconds(tc.path, tc.version)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Seconds = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		id, path string
		version  int
		ok       bool
	}{
		{"4242", "/system.slice/slurmstepd.scope/job_4242", 2, true},
		{"777", "/slurm/uid_1000/job_777", 1, true},
		{"5", "", 0, false},
		{"../x", "", 0, false},
	} {
		p, v, ok := c.FindSlurmJob(tc.id)
		if p != tc.path || v != tc.version || ok != tc.ok {
			t.Errorf("FindSlurmJob(%s) = %q, %d, %v; want %q, %d, %v", tc.id, p, v, ok, tc.path, tc.version, tc.ok)
		}
	}
}

func TestFindPod(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{
		"kubepods/burstable/pod" + testUID + "/cpu.stat",
		"cpu,cpuacct/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice/cpuacct.usage",
	} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("usage_usec 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := CPU{Root: root}
	for _, tc := range []struct {
		uid, path string
		version   int
		ok        bool
	}{
		{testUID, "/kubepods/burstable/pod" + testUID, 2, true},
		{"11111111-2222-3333-4444-555555555555", "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod11111111_2222_3333_4444_555555555555.slice", 1, true},
		{"99999999-2222-3333-4444-555555555555", "", 0, false},
		{"../../etc", "", 0, false},
	} {
		p, v, ok := c.FindPod(tc.uid)
		if p != tc.path || v != tc.version || ok != tc.ok {
			t.Errorf("FindPod(%s) = %q, %d, %v; want %q, %d, %v", tc.uid, p, v, ok, tc.path, tc.version, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if m != nil {
				t.Fatal("membership returned with an error")
			}
			return
		}
		if o, ok := m.Owner(); ok {
			if o.PodUID == "" && o.ContainerID == "" && o.SlurmJob == "" {
				t.Fatalf("owner without identity: %+v", o)
			}
			if jp, ok := o.JobPath(); ok && !strings.HasPrefix(o.Path, jp) {
				t.Fatalf("job path %q not a prefix of %q", jp, o.Path)
			}
		}
	})
}
