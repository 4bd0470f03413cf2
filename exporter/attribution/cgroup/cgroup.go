// Package cgroup reads /proc/<pid>/cgroup and names the owner it shows: a
// Kubernetes pod and container (containerd, CRI-O or Docker, under the
// systemd or the cgroupfs driver), a Docker container, or a Slurm job. It
// understands cgroup v1 (one line per hierarchy) and v2 (the single "0::" line).
package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Runtimes named in Owner.Runtime.
const (
	RuntimeContainerd = "containerd"
	RuntimeCRIO       = "cri-o"
	RuntimeDocker     = "docker"
)

// Membership is one parsed /proc/<pid>/cgroup file.
type Membership struct {
	// Unified is the cgroup v2 path ("" when the process has none).
	Unified string
	// HasUnified is true when a "0::" line was present.
	HasUnified bool
	// V1 maps each v1 controller (e.g. "cpuacct", "name=systemd") to its path.
	V1 map[string]string
}

// Owner is what a cgroup path says about who runs the process.
type Owner struct {
	PodUID      string // Kubernetes pod UID, with dashes
	ContainerID string // container id (64 hex digits as a rule)
	Runtime     string // RuntimeContainerd, RuntimeCRIO, RuntimeDocker, or "" when the path does not say
	SlurmJob    string // Slurm job id
	// Path is the cgroup path that named the owner, and Version its cgroup
	// version (1 or 2); Controller is the v1 controller of Path.
	Path       string
	Version    int
	Controller string
}

// Parse parses the content of /proc/<pid>/cgroup. A malformed line is an
// error naming the line; it never panics on any input.
func Parse(data []byte) (*Membership, error) {
	m := &Membership{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("line %d: want hierarchy-id:controllers:path, got %q", n, truncate(line))
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("line %d: bad hierarchy id %q", n, truncate(parts[0]))
		}
		path := parts[2]
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("line %d: cgroup path %q is not absolute (truncated file?)", n, truncate(path))
		}
		if id == 0 && parts[1] == "" {
			m.Unified, m.HasUnified = path, true
			continue
		}
		if parts[1] == "" {
			return nil, fmt.Errorf("line %d: hierarchy %d has no controllers", n, id)
		}
		if m.V1 == nil {
			m.V1 = map[string]string{}
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c != "" {
				m.V1[c] = path
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	if !m.HasUnified && len(m.V1) == 0 {
		return nil, errors.New("no cgroup lines (empty or truncated file)")
	}
	return m, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// v1Order is the order in which v1 hierarchies are asked: the accounting
// controllers first (they hold the job's CPU time), then the rest.
var v1Order = []string{"cpuacct", "cpu", "memory", "pids", "devices", "name=systemd", "freezer", "cpuset", "blkio"}

// Owner returns the owner named by the membership's paths; ok is false for a
// process in no pod, container or job (a host daemon, a login shell).
func (m *Membership) Owner() (Owner, bool) {
	if m.HasUnified {
		if o, ok := PathOwner(m.Unified); ok {
			o.Version = 2
			return o, true
		}
	}
	seen := map[string]bool{}
	try := func(c string) (Owner, bool) {
		p, ok := m.V1[c]
		if !ok || seen[c] {
			return Owner{}, false
		}
		seen[c] = true
		if o, ok := PathOwner(p); ok {
			o.Version, o.Controller = 1, c
			return o, true
		}
		return Owner{}, false
	}
	for _, c := range v1Order {
		if o, ok := try(c); ok {
			return o, true
		}
	}
	// Any other hierarchy, in a stable order.
	keys := make([]string, 0, len(m.V1))
	for c := range m.V1 {
		keys = append(keys, c)
	}
	sort.Strings(keys)
	for _, c := range keys {
		if o, ok := try(c); ok {
			return o, true
		}
	}
	return Owner{}, false
}

// PathOwner reads the owner from one cgroup path.
func PathOwner(path string) (Owner, bool) {
	o := Owner{Path: path}
	segs := strings.Split(path, "/")
	kube, slurm := false, false
	for i, s := range segs {
		switch {
		case s == "kubepods" || strings.HasPrefix(s, "kubepods-") || s == "kubepods.slice":
			kube = true
			if uid, ok := podUID(s); ok {
				o.PodUID = uid
			}
		case kube && strings.HasPrefix(s, "pod"):
			if uid, ok := podUID(s); ok {
				o.PodUID = uid
			}
		case strings.HasPrefix(s, "slurm"):
			slurm = true
		case slurm && strings.HasPrefix(s, "job_"):
			if id := s[len("job_"):]; isDigits(id) {
				o.SlurmJob = id
			}
		case s == "docker" && i+1 < len(segs) && isHex64(segs[i+1]):
			o.Runtime, o.ContainerID = RuntimeDocker, segs[i+1]
		}
	}
	if last := segs[len(segs)-1]; last != "" {
		if rt, id, ok := containerSegment(last); ok && o.ContainerID == "" {
			o.Runtime, o.ContainerID = rt, id
		} else if ok && o.ContainerID == id && rt != "" {
			o.Runtime = rt
		}
	}
	// A container's cgroup may nest one level deeper (e.g. a systemd scope
	// inside a pod, or "init.scope" under a container with cgroupns).
	if o.ContainerID == "" && len(segs) >= 2 {
		if rt, id, ok := containerSegment(segs[len(segs)-2]); ok {
			o.Runtime, o.ContainerID = rt, id
		}
	}
	if o.PodUID == "" && o.ContainerID == "" && o.SlurmJob == "" {
		return Owner{}, false
	}
	return o, true
}

// podUID extracts a UID from "pod<uid>" (cgroupfs driver) or from
// "kubepods[-<qos>]-pod<uid_with_underscores>.slice" (systemd driver).
func podUID(seg string) (string, bool) {
	seg = strings.TrimSuffix(seg, ".slice")
	i := strings.LastIndex(seg, "pod")
	if i < 0 {
		return "", false
	}
	if i > 0 && seg[i-1] != '-' {
		return "", false
	}
	uid := strings.ReplaceAll(seg[i+3:], "_", "-")
	if !isUID(uid) {
		return "", false
	}
	return uid, true
}

// containerSegment recognises the leaf cgroup of a container.
func containerSegment(seg string) (runtime, id string, ok bool) {
	s := strings.TrimSuffix(seg, ".scope")
	switch {
	case strings.HasPrefix(s, "cri-containerd-"):
		runtime, id = RuntimeContainerd, s[len("cri-containerd-"):]
	case strings.HasPrefix(s, "crio-conmon-"):
		return "", "", false // CRI-O's monitor, not the container
	case strings.HasPrefix(s, "crio-"):
		runtime, id = RuntimeCRIO, s[len("crio-"):]
	case strings.HasPrefix(s, "docker-"):
		runtime, id = RuntimeDocker, s[len("docker-"):]
	case isHex64(s):
		// cgroupfs driver: the bare id, written alike by containerd and dockershim.
		return "", s, true
	default:
		return "", "", false
	}
	if !isHex64(id) {
		return "", "", false
	}
	return runtime, id, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// isUID accepts the 8-4-4-4-12 hex form Kubernetes uses for pod UIDs.
func isUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// JobPath returns the part of o.Path that is the job's own cgroup: up to the
// Slurm "job_<id>" segment, or up to the pod's segment. The job's CPU time is
// read there, so it covers every step and container of the job.
func (o Owner) JobPath() (string, bool) {
	segs := strings.Split(o.Path, "/")
	for i, s := range segs {
		if o.SlurmJob != "" && s == "job_"+o.SlurmJob {
			return strings.Join(segs[:i+1], "/"), true
		}
		if o.PodUID != "" && (strings.HasPrefix(s, "pod") || strings.HasPrefix(s, "kubepods-")) {
			if uid, ok := podUID(s); ok && uid == o.PodUID {
				return strings.Join(segs[:i+1], "/"), true
			}
		}
	}
	return "", false
}
