package secret

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModeProblem: every permission a secret file may have, by owner. A
// group may read a root-owned file (Kubernetes' Secret volumes: root,
// fsGroup, 0440); nothing else beyond the owner may touch one.
func TestModeProblem(t *testing.T) {
	for _, tc := range []struct {
		perm os.FileMode
		uid  int
		want string // "" accepted
	}{
		{0o600, 1000, ""}, {0o400, 1000, ""}, {0o700, 1000, ""}, {0o600, 0, ""}, {0o400, 0, ""},
		{0o640, 0, ""}, {0o440, 0, ""}, {0o750, 0, ""},
		{0o644, 1000, "other users read"}, {0o604, 1000, "other users read"}, {0o666, 0, "other users read and write"},
		{0o602, 1000, "other users write"}, {0o601, 1000, "other users execute"}, {0o777, 0, "other users read and write and execute"},
		{0o644, 0, "other users read"}, {0o444, 0, "other users read"},
		{0o640, 1000, "group read it, and its owner is not root"}, {0o660, 1000, "group read and write"},
		{0o620, 1000, "group write"}, {0o610, 1000, "group execute"}, {0o440, 1000, "group read"},
		{0o660, 0, "group read and write it"}, {0o620, 0, "group write"}, {0o670, 0, "group"},
		{0o640, -1, "owner is not root"}, // owner unknown: not root
	} {
		err := modeProblem(tc.perm, tc.uid)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%04o uid %d: refused: %v", tc.perm, tc.uid, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "chmod")):
			t.Errorf("%04o uid %d: %v, want %q and a chmod", tc.perm, tc.uid, err, tc.want)
		}
	}
}

// TestReadFileRefusesLooseModes reads real files: a token file others can
// read is refused with an error naming the file and the chmod that mends
// it, and its token is never in the error.
func TestReadFileRefusesLooseModes(t *testing.T) {
	dir := t.TempDir()
	other := os.Getuid()
	if other == 0 {
		other = 65534 // as root, hand the file to nobody to test the group rule
	}
	for _, tc := range []struct {
		mode  os.FileMode
		owner int
		want  string
	}{
		{0o644, os.Getuid(), "chmod 600"},
		{0o604, os.Getuid(), "chmod 600"},
		{0o666, os.Getuid(), "chmod 600"},
		{0o640, other, "chmod 600"},
		{0o600, other, ""},
		{0o400, os.Getuid(), ""},
	} {
		p := filepath.Join(dir, "tok")
		_ = os.Remove(p)
		if err := os.WriteFile(p, []byte("s3cr3t-tok3n\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.mode); err != nil {
			t.Fatal(err)
		}
		if tc.owner != os.Getuid() {
			if err := os.Chown(p, tc.owner, -1); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ReadWord(p, nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%04o: %v", tc.mode, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want+" "+p) || strings.Contains(err.Error(), "s3cr3t")):
			t.Errorf("%04o owner %d: %v, want %q naming %s", tc.mode, tc.owner, err, tc.want, p)
		}
	}
	// Through a symlink (as Kubernetes mounts a Secret's key), the mode
	// that counts is the target's.
	target := filepath.Join(dir, "..data-tok")
	if err := os.WriteFile(target, []byte("s3cr3t-tok3n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadWord(link, nil); err == nil || !strings.Contains(err.Error(), "other users read") {
		t.Errorf("symlink to a 0644 file: %v", err)
	}
}

// TestReadFileTeachesTheProcess: a value read from a secret file is masked
// by the process-wide String, which the log handler and the audit use,
// though they never saw the Redactor it was read with.
func TestReadFileTeachesTheProcess(t *testing.T) {
	p := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(p, []byte("Tr0ub4dor&3 horse\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var own Redactor
	if _, err := ReadFile(p, &own); err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{String("login failed for Tr0ub4dor&3 horse"), (&Redactor{}).String("echo Tr0ub4dor&3 horse")} {
		if strings.Contains(got, "Tr0ub4dor") {
			t.Errorf("process-wide redaction missed the file's value: %q", got)
		}
	}
	Register("pg-pa55word")
	if got := String("FATAL: password authentication failed: pg-pa55word"); strings.Contains(got, "pa55word") {
		t.Errorf("Register: %q", got)
	}
}
