package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPU reads the CPU time of job cgroups under a cgroup root (/sys/fs/cgroup,
// or a host's cgroup root mounted into a container).
type CPU struct {
	Root string
}

// v1Mounts are the folder names the cpuacct controller is mounted under on
// the distributions we know (a symlink on most, a real folder on some).
var v1Mounts = []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"}

// Seconds returns the CPU time of the cgroup at path (as /proc/<pid>/cgroup
// writes it) for the given cgroup version: usage_usec of cpu.stat on v2,
// cpuacct.usage on v1.
func (c CPU) Seconds(path string, version int) (float64, error) {
	k, err := c.Open(path, version)
	if err != nil {
		return 0, err
	}
	defer k.Close()
	return k.Seconds()
}

// Counter is the open CPU accounting file of one cgroup. It is re-read in
// place (pread at offset 0 makes the kernel render it afresh), one system
// call per read instead of five for open-stat-read-read-close.
type Counter struct {
	f       *os.File
	version int
	buf     []byte
}

// Open opens the CPU accounting file of the cgroup at path.
func (c CPU) Open(path string, version int) (*Counter, error) {
	rel := strings.TrimPrefix(filepath.Clean("/"+path), "/")
	var names []string
	if version == 2 {
		names = []string{filepath.Join(c.Root, rel, "cpu.stat")}
	} else {
		for _, m := range v1Mounts {
			names = append(names, filepath.Join(c.Root, m, rel, "cpuacct.usage"))
		}
	}
	var firstErr error
	for _, n := range names {
		f, err := os.Open(n)
		if err == nil {
			return &Counter{f: f, version: version, buf: make([]byte, 1024)}, nil
		}
		if firstErr == nil {
			firstErr = fmt.Errorf("open %s: %w", n, err)
		}
	}
	return nil, firstErr
}

// Seconds reads the cgroup's CPU time now. A removed cgroup is an error
// (ENODEV or ENOENT); the counter should then be closed.
func (k *Counter) Seconds() (float64, error) {
	for {
		n, err := k.f.ReadAt(k.buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read %s: %w", k.f.Name(), err)
		}
		if n == len(k.buf) && len(k.buf) < 1<<20 {
			k.buf = make([]byte, 2*len(k.buf))
			continue
		}
		data := k.buf[:n]
		if k.version == 2 {
			usec, err := ParseCPUStat(data)
			if err != nil {
				return 0, fmt.Errorf("parse %s: %w", k.f.Name(), err)
			}
			return float64(usec) / 1e6, nil
		}
		ns, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", k.f.Name(), err)
		}
		return float64(ns) / 1e9, nil
	}
}

// Close closes the file.
func (k *Counter) Close() error { return k.f.Close() }

// ParseCPUStat returns usage_usec from a cgroup v2 cpu.stat file.
func ParseCPUStat(data []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || k != "usage_usec" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("usage_usec %q: %w", v, err)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no usage_usec line")
}

// FindSlurmJob looks for the cgroup of a Slurm job that has no GPU process
// to name it (the CPU-only job is the case that matters): Slurm's cgroup/v2
// plugin puts jobs under slurmstepd.scope, cgroup/v1 under slurm/uid_<uid>.
// It returns the path in /proc/<pid>/cgroup form and the cgroup version.
func (c CPU) FindSlurmJob(id string) (path string, version int, ok bool) {
	if !isDigits(id) {
		return "", 0, false
	}
	job := "job_" + id
	patterns := []struct {
		glob    string
		version int
	}{
		{filepath.Join(c.Root, "system.slice", "slurmstepd.scope", job), 2},
		{filepath.Join(c.Root, "*.slice", "slurmstepd.scope", job), 2},
		{filepath.Join(c.Root, "*", "slurmstepd.scope", job), 2},
		{filepath.Join(c.Root, "cpuacct", "slurm*", "uid_*", job), 1},
		{filepath.Join(c.Root, "cpu,cpuacct", "slurm*", "uid_*", job), 1},
		{filepath.Join(c.Root, "cpuacct,cpu", "slurm*", "uid_*", job), 1},
	}
	for _, p := range patterns {
		matches, _ := filepath.Glob(p.glob)
		if len(matches) == 0 {
			continue
		}
		rel, err := filepath.Rel(c.Root, matches[0])
		if err != nil {
			continue
		}
		if p.version == 1 {
			// Drop the controller folder: the path is as /proc/<pid>/cgroup has it.
			_, rel, _ = strings.Cut(rel, string(filepath.Separator))
		}
		return "/" + filepath.ToSlash(rel), p.version, true
	}
	return "", 0, false
}

// FindPod looks for the cgroup of a Kubernetes pod by its UID, under the
// cgroupfs and systemd drivers' layouts and every QoS class, on cgroup v2
// and then v1. It returns the path in /proc/<pid>/cgroup form.
func (c CPU) FindPod(uid string) (path string, version int, ok bool) {
	if !isUID(uid) {
		return "", 0, false
	}
	under := strings.ReplaceAll(uid, "-", "_")
	rels := []string{
		"kubepods/pod" + uid,
		"kubepods/burstable/pod" + uid,
		"kubepods/besteffort/pod" + uid,
		"kubepods.slice/kubepods-pod" + under + ".slice",
		"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + under + ".slice",
		"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + under + ".slice",
	}
	for _, rel := range rels {
		if _, err := os.Stat(filepath.Join(c.Root, rel, "cpu.stat")); err == nil {
			return "/" + rel, 2, true
		}
	}
	for _, m := range v1Mounts {
		for _, rel := range rels {
			if _, err := os.Stat(filepath.Join(c.Root, m, rel, "cpuacct.usage")); err == nil {
				return "/" + rel, 1, true
			}
		}
	}
	return "", 0, false
}
