package testtool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// ReplayCacheEnv turns the replay cache off ("off") or moves it (a folder;
// the default is the user's cache folder, ~/.cache/gpuwatch/replay).
const ReplayCacheEnv = "GPUWATCH_REPLAY_CACHE"

// keepReplays is how many entries of one replay the cache keeps: the
// current one and the one before it (a branch and main, side by side).
const keepReplays = 2

// Replay describes a replayed corpus written to disk (stores a simulator
// filled): what generates it, so that the cache can tell when it changed.
type Replay struct {
	// Name names the replay in the cache ("corpus-week"); the cache keeps
	// the last two versions of each name, so replays that live side by
	// side (variants of one corpus) need names of their own.
	Name string
	// Packages are the import paths whose code writes the replay: every
	// package of this module they depend on is hashed, source and embedded
	// files (third-party code enters through go.sum).
	Packages []string
	// Files are other inputs, relative to the repository root or
	// absolute: the scenario, the test files that set the formats and
	// seeds, the binaries of the servers written to.
	Files []string
	// Extra is anything else that decides the output: seeds, spans, the
	// versions of the external servers written to.
	Extra string
}

// CachedReplay fills dir as build would, from the cache when an entry with
// the same inputs exists (copied, so the stores opened on dir may write),
// else by calling build and keeping a copy of dir. build must leave dir
// complete and its stores closed. A replay is a pure function of what
// generates it, so a second run of the suite on the same code skips the
// simulation; any change to that code, the scenario or a dependency makes
// a new entry. It reports whether the cache served it.
func CachedReplay(t testing.TB, r Replay, dir string, build func(dir string) error) (bool, error) {
	t.Helper()
	root, on := replayRoot()
	if !on {
		return false, build(dir)
	}
	key, err := replayKey(r)
	if err != nil {
		t.Logf("replay cache off for %s: %v", r.Name, err)
		return false, build(dir)
	}
	name := slug(r.Name)
	entry := filepath.Join(root, name+"-"+key[:24])
	if _, err := os.Stat(filepath.Join(entry, ".complete")); err == nil {
		if err := copyTree(entry, dir); err != nil {
			return false, fmt.Errorf("replay cache %s: %w", entry, err)
		}
		now := time.Now()
		_ = os.Chtimes(entry, now, now) // most recently used
		return true, nil
	}
	if err := build(dir); err != nil {
		return false, err
	}
	if err := store(root, entry, dir); err != nil {
		t.Logf("replay %s not cached: %v", r.Name, err)
	}
	prune(root, name)
	return false, nil
}

// slug is name as a folder name: lower case letters, digits and dashes.
func slug(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(name))
}

func replayRoot() (string, bool) {
	switch v := os.Getenv(ReplayCacheEnv); v {
	case "off":
		return "", false
	case "":
		d, err := os.UserCacheDir()
		if err != nil {
			return "", false
		}
		return filepath.Join(d, "gpuwatch", "replay"), true
	default:
		return v, true
	}
}

// store copies dir into the cache under a temporary name and renames it
// into place: a test run beside this one sees a whole entry or none.
func store(root, entry, dir string) error {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(root, ".incoming-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := copyTree(dir, tmp); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, entry); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(filepath.Join(entry, ".complete")); serr == nil {
			return nil // another run stored the same entry first
		}
		return err
	}
	return nil
}

// prune keeps the keepReplays most recently used entries of name.
func prune(root, name string) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return
	}
	type aged struct {
		path string
		mod  int64
	}
	var mine []aged
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), name+"-") {
			continue
		}
		if info, err := e.Info(); err == nil {
			mine = append(mine, aged{filepath.Join(root, e.Name()), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].mod > mine[j].mod })
	for i := keepReplays; i < len(mine); i++ {
		os.RemoveAll(mine[i].path)
	}
}

// replayKey hashes everything that decides a replay's output.
func replayKey(r Replay) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return replayKeyAt(root, r)
}

// replayKeyAt is replayKey for the checkout at root. The files of the
// checkout are named by their path within it, not on the machine: a fresh
// clone of the same code elsewhere (CI clones anew for every run) finds
// the entries the last one stored.
func replayKeyAt(root string, r Replay) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s/%s\n%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, r.Extra)
	files, err := moduleSources(root, r.Packages)
	if err != nil {
		return "", err
	}
	files = append(files, "go.mod", "go.sum")
	files = append(files, r.Files...)
	for _, f := range files {
		path := f
		if !filepath.IsAbs(f) {
			path = filepath.Join(root, f)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(f), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// moduleSources lists, relative to root, the source and embedded files of
// every package of this module that pkgs depend on, in a stable order.
func moduleSources(root string, pkgs []string) ([]string, error) {
	args := append([]string{"list", "-deps", "-f",
		`{{if and .Module (eq .Module.Path "` + rootModule + `")}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .CgoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}`}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(pkgs, " "), err)
	}
	var files []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		rel, err := filepath.Rel(root, l)
		if err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	sort.Strings(files)
	return files, nil
}

// copyTree copies the regular files and folders under src into dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == ".complete" {
			return nil
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o700)
		case d.Type().IsRegular():
			return copyFile(p, to)
		}
		return nil // sockets, lock files' links: not part of a store
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
