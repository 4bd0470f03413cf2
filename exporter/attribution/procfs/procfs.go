// Package procfs reads what attribution needs to know about a GPU process
// from a proc file system: its command (comm), its real uid and user name
// (status), and the pod, container or Slurm job its cgroup names.
//
// The proc root is configurable (/proc, or the host's /proc mounted into the
// exporter's container, where NVML's PIDs are the host's). Results are cached
// per PID. A cached process is trusted for Recheck (default 10s) without a
// system call, then checked against its start time, so a PID reused by
// another process is found out within Recheck and never confused for longer.
// Reading /proc on every collection would cost more than the collection.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/cgroup"
)

// Info is what was read about one process.
type Info struct {
	PID     int
	Command string
	UID     int // -1 when unknown
	User    string
	// Owner is what the cgroup names; HasOwner is false for a process in no
	// pod, container or job.
	Owner    cgroup.Owner
	HasOwner bool
	// JobPath is the job's (or pod's) own cgroup, from Owner.JobPath.
	JobPath string
	// EnvJob is SLURM_JOB_ID from the process's environment, read only when
	// the cgroup names no owner: with proctrack/linuxproc Slurm makes no
	// cgroups, and the environment is then the only trace of the job.
	EnvJob string
}

// UserLookup maps a uid to a user name.
type UserLookup func(uid int) (string, error)

// SystemUsers looks users up through os/user (NSS with cgo, /etc/passwd without).
func SystemUsers(uid int) (string, error) {
	u, err := user.LookupId(strconv.Itoa(uid))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// Reader reads processes under Root. It is not safe for concurrent use.
type Reader struct {
	root   string
	lookup UserLookup
	procs  map[int]cachedProc
	users  map[int]string
	// Recheck is how long a cached process is trusted; Now is the clock.
	Recheck time.Duration
	Now     func() time.Time
}

type cachedProc struct {
	start   uint64
	checked time.Time
	info    Info
}

// maxUsers bounds the user-name cache; past it the cache starts afresh.
const maxUsers = 4096

// New builds a Reader; lookup defaults to SystemUsers.
func New(root string, lookup UserLookup) *Reader {
	if root == "" {
		root = "/proc"
	}
	if lookup == nil {
		lookup = SystemUsers
	}
	return &Reader{root: root, lookup: lookup, procs: map[int]cachedProc{}, users: map[int]string{},
		Recheck: 10 * time.Second, Now: time.Now}
}

// Process returns what is known of pid. A process that exited is an error
// wrapping os.ErrNotExist. A cgroup file that cannot be parsed is an error,
// but the command and user are still returned.
func (r *Reader) Process(pid int) (Info, error) {
	if pid <= 0 {
		return Info{}, fmt.Errorf("pid %d: %w", pid, os.ErrNotExist)
	}
	now := r.Now()
	c, cached := r.procs[pid]
	if cached && now.Sub(c.checked) < r.Recheck {
		return c.info, nil
	}
	dir := filepath.Join(r.root, strconv.Itoa(pid))
	start, err := startTime(filepath.Join(dir, "stat"))
	if err != nil {
		delete(r.procs, pid)
		return Info{}, err
	}
	if cached && c.start == start {
		c.checked = now
		r.procs[pid] = c
		return c.info, nil
	}
	info := Info{PID: pid, UID: -1}
	var errs []error
	if comm, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		info.Command = strings.TrimRight(string(comm), "\n")
	} else {
		errs = append(errs, fmt.Errorf("read %s/comm: %w", dir, err))
	}
	if uid, err := realUID(filepath.Join(dir, "status")); err == nil {
		info.UID = uid
		info.User = r.userName(uid)
	} else {
		errs = append(errs, err)
	}
	cgPath := filepath.Join(dir, "cgroup")
	if data, err := os.ReadFile(cgPath); err != nil {
		errs = append(errs, fmt.Errorf("read %s: %w", cgPath, err))
	} else if m, err := cgroup.Parse(data); err != nil {
		errs = append(errs, fmt.Errorf("parse %s: %w", cgPath, err))
	} else {
		info.Owner, info.HasOwner = m.Owner()
		info.JobPath, _ = info.Owner.JobPath()
	}
	if !info.HasOwner {
		// Unreadable environ (another user's process without privileges) is not
		// an error: the process is simply not tied to a job.
		if env, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil {
			info.EnvJob = envValue(env, "SLURM_JOB_ID")
		}
	}
	err = errors.Join(errs...)
	if err == nil {
		// Only complete reads are cached: a half-read process is tried again.
		r.procs[pid] = cachedProc{start: start, checked: now, info: info}
	}
	return info, err
}

// Forget drops cached processes that are not in live.
func (r *Reader) Forget(live map[int]bool) {
	for pid := range r.procs {
		if !live[pid] {
			delete(r.procs, pid)
		}
	}
}

func (r *Reader) userName(uid int) string {
	if n, ok := r.users[uid]; ok {
		return n
	}
	name, err := r.lookup(uid)
	if err != nil || name == "" {
		name = strconv.Itoa(uid) // as ps(1) shows an unknown uid
	}
	if len(r.users) >= maxUsers {
		clear(r.users)
	}
	r.users[uid] = name
	return name
}

// startTime reads field 22 (starttime) of /proc/<pid>/stat. The command in
// field 2 may hold spaces and parentheses, so fields are counted after the last ')'.
func startTime(path string) (uint64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse %s: no command field", path)
	}
	fields := strings.Fields(string(data[i+1:]))
	// After the command: state(3) ppid(4) ... starttime(22) is index 19.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse %s: %d fields after the command, want at least 20 (truncated?)", path, len(fields))
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: starttime %q: %w", path, fields[19], err)
	}
	return v, nil
}

// realUID reads the real uid (first of the four) of the Uid: line.
func realUID(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return -1, fmt.Errorf("read %s: %w", path, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		uid, err := strconv.Atoi(f[0])
		if err != nil || uid < 0 {
			return -1, fmt.Errorf("parse %s: Uid %q", path, f[0])
		}
		return uid, nil
	}
	return -1, fmt.Errorf("parse %s: no Uid line", path)
}

// envValue returns the value of key in a NUL-separated environment block.
func envValue(env []byte, key string) string {
	prefix := []byte(key + "=")
	for _, kv := range bytes.Split(env, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			s := string(v)
			for i := 0; i < len(s); i++ {
				if (s[i] < '0' || s[i] > '9') && s[i] != '_' {
					return ""
				}
			}
			return s
		}
	}
	return ""
}
