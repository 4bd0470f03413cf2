package store

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOpenEscapesPath: the path used to be pasted into the SQLite URI, so
// "a#b.db" wrote to "a" and dropped WAL and the busy timeout.
func TestOpenEscapesPath(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"a#b.db", "c?d.db", "e%41.db", "f g&_pragma=x.db", "ü.db"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			var mode string
			if err := s.DB().QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Errorf("journal_mode = %q, %v; want wal", mode, err)
			}
			var timeout int
			if err := s.DB().QueryRow(`PRAGMA busy_timeout`).Scan(&timeout); err != nil || timeout != 5000 {
				t.Errorf("busy_timeout = %d, %v; want 5000", timeout, err)
			}
			s.Close()
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if len(names) == 0 || names[0] != name {
				t.Fatalf("files in the folder: %q, want %q (and its -wal/-shm)", names, name)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != FileMode {
				t.Fatalf("store file mode %v (%v), want %v", fi.Mode().Perm(), err, os.FileMode(FileMode))
			}
		})
	}
}

// TestOpenTightensWorldReadable: a store left readable by everybody (audit
// log, users, recipients) loses world access when opened.
func TestOpenTightensWorldReadable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o007 != 0 {
			t.Errorf("%s mode %v: world access left", p, fi.Mode().Perm())
		}
	}
}

const readOnlyHelper = "GPUWATCH_STORE_READONLY_HELPER"

// TestOpenReadOnlyWithoutWriteAccess opens a store as an unprivileged user
// who may read the file but write neither it nor its folder: audit and
// report previews need nothing more.
func TestOpenReadOnlyWithoutWriteAccess(t *testing.T) {
	t.Parallel()
	if path := os.Getenv(readOnlyHelper); path != "" {
		s, err := OpenReadOnly(path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if v, err := s.Version(context.Background()); err != nil || v != SchemaVersion() {
			t.Fatalf("schema version %d, %v; want %d", v, err, SchemaVersion())
		}
		var n int
		if err := s.DB().QueryRow(`SELECT count(*) FROM usage`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("count = %d, %v", n, err)
		}
		if _, err := s.DB().Exec(`DELETE FROM usage`); err == nil {
			t.Fatal("a read-only store accepted a write")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("this test drops to user nobody and must run as root (CI does)")
	}
	dir, err := os.MkdirTemp("", "store-ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "gpuwatch.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // a clean close checkpoints and removes -wal and -shm
	bin := filepath.Join(dir, "store.test")
	copyFile(t, os.Args[0], bin)
	for _, c := range []struct {
		p    string
		mode os.FileMode
	}{{path, 0o444}, {bin, 0o755}, {dir, 0o555}} {
		if err := os.Chmod(c.p, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^TestOpenReadOnlyWithoutWriteAccess$")
	cmd.Env = append(os.Environ(), readOnlyHelper+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("read-only open as nobody: %v\n%s", err, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
