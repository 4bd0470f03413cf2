package jobmap

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, in string
		want     []Entry
		wantErr  string
	}{
		{"dcgm-exporter plain ids", "4242\n4243\n", []Entry{{Job: "4242", UID: -1}, {Job: "4243", UID: -1}}, ""},
		{"blank lines, comments, CRLF", "\n# written by hand\r\n 17 \r\n", []Entry{{Job: "17", UID: -1}}, ""},
		{"extended", "4242 user=alice uid=1000 account=physics name=train%20resnet%3Dv2 start=1732870000\n",
			[]Entry{{Job: "4242", User: "alice", UID: 1000, Account: "physics", Name: "train resnet=v2", Start: time.Unix(1732870000, 0)}}, ""},
		{"empty values and unknown keys", "9 user= uid= account= name= start= partition=gpu\n", []Entry{{Job: "9", UID: -1}}, ""},
		{"array job id", "100_3 user=bob\n", []Entry{{Job: "100_3", User: "bob", UID: -1}}, ""},
		{"not key=value", "1 alice\n", nil, "f:1: field \"alice\" is not key=value"},
		{"bad escape", "1\n2 name=%zz\n", nil, "f:2: field name"},
		{"bad uid", "1 uid=-3\n", nil, "f:1: uid"},
		{"bad start", "1 start=yesterday\n", nil, "f:1: start"},
		{"job id with =", "user=alice\n", nil, "bad job id"},
		{"control character in value", "1 name=a%07b\n", nil, "control characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse("f", []byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseSlot(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Slot
		ok   bool
	}{
		{"0", Slot{0, -1}, true}, {"7", Slot{7, -1}, true}, {"1.3", Slot{1, 3}, true},
		{".lock", Slot{}, false}, {".0.abc123", Slot{}, false}, {"01", Slot{}, false}, {"-1", Slot{}, false},
		{"1.", Slot{}, false}, {"1.2.3", Slot{}, false}, {"gpu0", Slot{}, false},
	} {
		got, ok := ParseSlot(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseSlot(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestReaderCachesAndFollowsChanges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "map")
	r := NewReader(dir)
	r.Recheck = 0 // every Read is a full pass here; TestReaderFolderShortcut covers the shortcut
	m, err := r.Read()
	if err != nil || len(m) != 0 {
		t.Fatalf("missing folder: %v, %v; want empty, nil", m, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mtime time.Time) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Unix(1700000000, 0)
	write("0", "11 user=a\n", t0)
	write("1.2", "12\n", t0)
	write(".lock", "", t0)
	write(".0.tmp123", "garbage = =\n", t0)
	m, err = r.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := Mapping{{0, -1}: {{Job: "11", User: "a", UID: -1}}, {1, 2}: {{Job: "12", UID: -1}}}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("got %+v, want %+v", m, want)
	}

	// Same size and mtime: the cached entries are served, the file is not re-read.
	write("0", "99 user=b\n", t0)
	m, _ = r.Read()
	if m[Slot{0, -1}][0].Job != "11" {
		t.Fatalf("changed file with unchanged mtime/size was re-read: %+v", m)
	}
	// A new mtime is noticed.
	write("0", "99 user=b\n", t0.Add(time.Second))
	m, _ = r.Read()
	if m[Slot{0, -1}][0].Job != "99" {
		t.Fatalf("changed file not re-read: %+v", m)
	}

	// A broken file is reported; the others still count.
	write("3", "1 bad\n", t0)
	m, err = r.Read()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "3")+":1") {
		t.Fatalf("err = %v, want the broken file with its line", err)
	}
	if len(m[Slot{1, 2}]) != 1 {
		t.Fatalf("good files lost after a bad one: %+v", m)
	}

	// Removed files disappear.
	for _, n := range []string{"0", "3"} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	m, err = r.Read()
	if err != nil || len(m) != 1 {
		t.Fatalf("after removal: %+v, %v", m, err)
	}
	if got := m.Slots(); !reflect.DeepEqual(got, []Slot{{1, 2}}) {
		t.Fatalf("Slots = %v", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1\n", "4242 user=alice uid=1000 account=physics name=a%20b start=1\n", "# c\n\n7 x=y\n", "1 name=%"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		for _, e := range entries {
			if e.Job == "" || strings.ContainsAny(e.Job, " \t\n=") {
				t.Fatalf("bad job id accepted: %q", e.Job)
			}
			if !printable(e.User) || !printable(e.Name) || !printable(e.Account) {
				t.Fatalf("control characters accepted: %+v", e)
			}
		}
	})
}

func TestReaderFolderShortcut(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	if err := os.WriteFile(filepath.Join(dir, "0"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	r := NewReader(dir)
	r.Now = func() time.Time { return clock }
	if m, err := r.Read(); err != nil || m[Slot{0, -1}][0].Job != "1" {
		t.Fatalf("first read: %v, %v", m, err)
	}
	// Rewritten in place, folder untouched: not seen before Recheck ...
	if err := os.WriteFile(filepath.Join(dir, "0"), []byte("22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if m, _ := r.Read(); m[Slot{0, -1}][0].Job != "1" {
		t.Fatalf("full pass before Recheck: %v", m)
	}
	// ... and seen after it.
	clock = clock.Add(r.Recheck)
	if m, _ := r.Read(); m[Slot{0, -1}][0].Job != "22" {
		t.Fatalf("in-place change not seen after Recheck: %v", m)
	}
	// A new file (rename into the folder) changes the folder mtime: seen at once.
	if err := os.WriteFile(filepath.Join(dir, ".tmp"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, ".tmp"), filepath.Join(dir, "1")); err != nil {
		t.Fatal(err)
	}
	clock = time.Now()
	if m, _ := r.Read(); len(m[Slot{1, -1}]) != 1 {
		t.Fatalf("renamed-in file not seen at once: %v", m)
	}
	// The folder mtime is now recent: not trusted, every Read is a full pass.
	if err := os.WriteFile(filepath.Join(dir, "1"), []byte("4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, _ := r.Read(); m[Slot{1, -1}][0].Job != "4" {
		t.Fatalf("recent folder mtime trusted: %v", m)
	}
}

// TestReaderRefusesHostileFiles plants what an attacker with a foothold, or
// a careless setup, could leave in the folder: links to a root-only file and
// to /dev/zero, a FIFO, an oversized file and one with too many lines. The
// good file is still read; every other one is an error, read in no part, and
// none blocks or grows memory.
func TestReaderRefusesHostileFiles(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "map")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(tmp, "secret")
	write := func(path, s string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "1 user=root name=TOPSECRET\n", 0o600)
	write(filepath.Join(dir, "0"), "7 user=alice\n", 0o644)
	for name, target := range map[string]string{"1": secret, "2": "/dev/zero"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "3"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "4"), strings.Repeat("8 name="+strings.Repeat("x", 1000)+"\n", MaxFileBytes/1000+10), 0o644)
	write(filepath.Join(dir, "5"), strings.Repeat("9\n", MaxLines+1), 0o644)
	if os.Geteuid() == 0 {
		write(filepath.Join(dir, "6"), "10 user=mallory\n", 0o644)
		if err := os.Chown(filepath.Join(dir, "6"), 12345, 12345); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var m Mapping
	var err error
	go func() {
		m, err = NewReader(dir).Read()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Read blocked on a hostile file")
	}
	if len(m) != 1 || len(m[Slot{GPU: 0, GI: -1}]) != 1 || m[Slot{GPU: 0, GI: -1}][0].User != "alice" {
		t.Fatalf("mapping = %+v, want only GPU 0's alice", m)
	}
	want := []string{"1: not a regular file", "2: not a regular file", "3: not a regular file", "4: 1", "5:10001: more than"}
	if os.Geteuid() == 0 {
		want = append(want, "6: owned by uid 12345")
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, w)) {
			t.Errorf("error %v does not name %q", err, w)
		}
	}
}

// TestReaderRefusesOpenFolder: a folder others may write is no evidence of
// what the scheduler allocated.
func TestReaderRefusesOpenFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "map")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "0"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	m, err := NewReader(dir).Read()
	if err == nil || !strings.Contains(err.Error(), "writable by group or others") || len(m) != 0 {
		t.Fatalf("Read = %v, %v; want a refusal", m, err)
	}
}
