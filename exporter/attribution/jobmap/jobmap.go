// Package jobmap reads a job-mapping folder in the format of dcgm-exporter's
// --hpc-job-mapping-dir: one file per GPU, named by the GPU index ("0") or,
// for a MIG instance, "<gpu>.<gpu-instance>" ("0.3"); one job per line.
//
// A line is a job id, optionally followed by space-separated key=value
// fields that gpuwatch's Slurm prolog writes (deploy/slurm/prolog):
//
//	4242 user=alice uid=1000 account=physics name=train%20resnet start=1732870000
//
// Values are percent-encoded (at least %, space, tab and =). Keys: user, uid,
// account, name (job name), start (Unix seconds). Unknown keys are ignored so
// newer prologs work with older exporters. Blank lines and lines starting
// with # are skipped; a bare job id line, as every other tool writes, stays valid.
package jobmap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Slot is the GPU (and MIG GPU instance) a mapping file names.
type Slot struct {
	GPU int
	GI  int // MIG GPU instance id, -1 for a whole GPU
}

// ParseSlot parses a file name: "<gpu>" or "<gpu>.<gi>".
func ParseSlot(name string) (Slot, bool) {
	g, gi, hasGI := strings.Cut(name, ".")
	gpu, err := strconv.Atoi(g)
	if err != nil || gpu < 0 || g != strconv.Itoa(gpu) {
		return Slot{}, false
	}
	if !hasGI {
		return Slot{GPU: gpu, GI: -1}, true
	}
	id, err := strconv.Atoi(gi)
	if err != nil || id < 0 || gi != strconv.Itoa(id) {
		return Slot{}, false
	}
	return Slot{GPU: gpu, GI: id}, true
}

// Entry is one job on one GPU.
type Entry struct {
	Job     string
	User    string
	UID     int // -1 when not given
	Account string
	Name    string
	Start   time.Time // zero when not given
}

// Parse parses one mapping file; name is used in errors. A malformed line is
// an error with its line number.
func Parse(name string, data []byte) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	n := 0
	for sc.Scan() {
		n++
		if n > MaxLines {
			return nil, fmt.Errorf("%s:%d: more than %d lines", name, n, MaxLines)
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		e := Entry{Job: fields[0], UID: -1}
		if strings.Contains(e.Job, "=") || !printable(e.Job) {
			return nil, fmt.Errorf("%s:%d: bad job id %q", name, n, clip(e.Job))
		}
		for _, f := range fields[1:] {
			k, raw, ok := strings.Cut(f, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%s:%d: field %q is not key=value", name, n, clip(f))
			}
			v, err := url.PathUnescape(raw)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: field %s: %w", name, n, k, err)
			}
			if !printable(v) {
				return nil, fmt.Errorf("%s:%d: field %s holds control characters", name, n, k)
			}
			switch k {
			case "user":
				e.User = v
			case "account":
				e.Account = v
			case "name":
				e.Name = v
			case "uid":
				if v == "" {
					continue
				}
				u, err := strconv.Atoi(v)
				if err != nil || u < 0 {
					return nil, fmt.Errorf("%s:%d: uid %q is not a number", name, n, clip(v))
				}
				e.UID = u
			case "start":
				if v == "" {
					continue
				}
				s, err := strconv.ParseInt(v, 10, 64)
				if err != nil || s < 0 {
					return nil, fmt.Errorf("%s:%d: start %q is not Unix seconds", name, n, clip(v))
				}
				e.Start = time.Unix(s, 0)
			}
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, n+1, err)
	}
	return out, nil
}

func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// Limits on what one mapping file may hold. A file past them is refused
// whole (an error), never read in part: a job map names at most a few
// hundred jobs per GPU, so these bounds only stop a runaway or hostile file.
const (
	MaxFileBytes = 1 << 20
	MaxLines     = 10000
)

// Reader reads a mapping folder, re-reading a file only when its size or
// modification time changed. It is not safe for concurrent use.
//
// Between full passes it stats only the folder: creating, renaming or
// removing a file (what the shipped prolog and epilog do) changes the
// folder's mtime and is seen at once. A file rewritten in place changes only
// its own mtime and is seen at the next full pass, at most Recheck later.
// A folder mtime less than a second older than the pass that saw it is not
// trusted, since mtimes are coarse and a second change could share it.
type Reader struct {
	Dir string
	// Recheck bounds the time between full passes (default 5s; 0: every Read).
	Recheck time.Duration
	Now     func() time.Time

	cache    map[string]cached
	dirMtime time.Time
	lastFull time.Time
	trusted  bool
	last     Mapping
	lastErr  error
}

type cached struct {
	mtime   time.Time
	size    int64
	entries []Entry
	err     error
}

// Mapping is the folder's content: jobs per slot.
type Mapping map[Slot][]Entry

// NewReader reads dir.
func NewReader(dir string) *Reader {
	return &Reader{Dir: dir, cache: map[string]cached{}, Recheck: 5 * time.Second, Now: time.Now}
}

// Read returns the current mapping. A missing folder is an empty mapping
// (the prolog creates it with the first job). Errors of single files are
// returned together with the entries of every other file.
//
// The folder is trusted only when it is owned by root (or by the exporter's
// own user) and writable by nobody else; in it only regular files of that
// owner are read, never through a symlink, and never more than
// MaxFileBytes or MaxLines.
func (r *Reader) Read() (Mapping, error) {
	now := r.Now()
	st, err := os.Stat(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(r.cache)
		r.trusted = false
		return Mapping{}, nil
	}
	if err != nil {
		r.trusted = false
		return nil, fmt.Errorf("read job map %s: %w", r.Dir, err)
	}
	if err := checkOwner(r.Dir, st, true); err != nil {
		r.trusted = false
		return nil, err
	}
	if r.trusted && st.ModTime().Equal(r.dirMtime) && now.Sub(r.lastFull) < r.Recheck {
		return r.last, r.lastErr
	}
	m, err := r.full()
	r.dirMtime, r.lastFull = st.ModTime(), now
	r.trusted = now.Sub(st.ModTime()) > time.Second
	r.last, r.lastErr = m, err
	return m, err
}

func (r *Reader) full() (Mapping, error) {
	ents, err := os.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		clear(r.cache)
		return Mapping{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job map %s: %w", r.Dir, err)
	}
	m := Mapping{}
	var errs []error
	seen := make(map[string]bool, len(ents))
	for _, de := range ents {
		name := de.Name()
		slot, ok := ParseSlot(name)
		if !ok {
			continue
		}
		path := filepath.Join(r.Dir, name)
		if !de.Type().IsRegular() {
			errs = append(errs, fmt.Errorf("read job map %s: not a regular file (%s): ignored", path, de.Type()))
			continue
		}
		seen[name] = true
		info, err := os.Lstat(path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // removed by an epilog since ReadDir
				errs = append(errs, fmt.Errorf("read job map %s: %w", path, err))
			}
			continue
		}
		c, ok := r.cache[name]
		if !ok || !c.mtime.Equal(info.ModTime()) || c.size != info.Size() {
			c = cached{mtime: info.ModTime(), size: info.Size()}
			data, err := readFile(path)
			if err != nil {
				c.err = err
			} else {
				c.entries, c.err = Parse(path, data)
			}
			r.cache[name] = c
		}
		if c.err != nil {
			errs = append(errs, c.err)
			continue
		}
		if len(c.entries) > 0 {
			m[slot] = c.entries
		}
	}
	for name := range r.cache {
		if !seen[name] {
			delete(r.cache, name)
		}
	}
	return m, errors.Join(errs...)
}

// readFile reads one mapping file without following a symlink or blocking
// on a FIFO, and only when it is a regular file of a trusted owner within
// MaxFileBytes.
func readFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read job map %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read job map %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read job map %s: not a regular file", path)
	}
	if err := checkOwner(path, st, false); err != nil {
		return nil, err
	}
	if st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("read job map %s: %d bytes, more than the limit of %d", path, st.Size(), MaxFileBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read job map %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("read job map %s: more than the limit of %d bytes", path, MaxFileBytes)
	}
	return data, nil
}

// checkOwner accepts what root or the exporter's own user owns; a folder
// must also be writable by nobody else, or anyone could plant files in it.
func checkOwner(path string, st fs.FileInfo, dir bool) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("read job map %s: owned by uid %d, not root: refused", path, sys.Uid)
	}
	if dir && st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("read job map %s: writable by group or others (%s): refused", path, st.Mode().Perm())
	}
	return nil
}

// Slots returns the mapping's slots in order, for stable output.
func (m Mapping) Slots() []Slot {
	out := make([]Slot, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].GI < out[j].GI
	})
	return out
}
