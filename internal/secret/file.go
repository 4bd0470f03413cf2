package secret

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
)

// MaxBytes bounds a secret file.
const MaxBytes = 4096

// ErrNotOneLine is returned for a secret file that holds nothing, or more
// than one line.
var ErrNotOneLine = errors.New("want exactly one secret on one line")

// ErrNotOneWord is returned for a token file whose token holds spaces.
var ErrNotOneWord = errors.New("want exactly one token (one word, one line)")

// ReadFile reads a secret file through the same checks as configuration
// files (a regular file, never a FIFO or device, bounded in size) and
// CheckMode's, and returns its one line without the line end (a password
// may hold spaces). The value is added to r (when not nil) and to the
// process-wide redaction, so that it is masked from then on.
func ReadFile(path string, r *Redactor) (string, error) {
	data, err := configfile.ReadFileChecked(path, CheckMode)
	var me *ModeError
	if errors.As(err, &me) {
		return "", fmt.Errorf("secret file %s: %s (chmod %s %s)", path, me.Problem, me.Chmod, path)
	}
	if err != nil {
		return "", fmt.Errorf("secret file %s: %w", path, trimPath(err, path))
	}
	if len(data) > MaxBytes {
		return "", fmt.Errorf("secret file %s: %d bytes, more than %d", path, len(data), MaxBytes)
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("secret file %s: %w", path, ErrNotOneLine)
	}
	if r != nil {
		r.Add(v)
	} else {
		Register(v)
	}
	return v, nil
}

// ReadWord reads a token file as ReadFile does and refuses a token with
// blanks in it, which no header could carry.
func ReadWord(path string, r *Redactor) (string, error) {
	v, err := ReadFile(path, r)
	if err != nil {
		return "", err
	}
	v = strings.TrimSpace(v)
	if v == "" || strings.ContainsAny(v, " \t") {
		return "", fmt.Errorf("secret file %s: %w", path, ErrNotOneWord)
	}
	return v, nil
}

func trimPath(err error, path string) error {
	msg := strings.TrimPrefix(err.Error(), path+": ")
	if msg == err.Error() {
		return err
	}
	return errors.New(msg)
}

// CheckMode refuses a secret file that anyone but its owner could read or
// change: other users' read, write or execute bits, and the group's, as
// ssh refuses a private key. One exception, PostgreSQL's for its key files:
// a file owned by root may be read (never written) by its group, because
// root chose that group; Kubernetes mounts a Secret that way (root owner,
// the pod's fsGroup, 0440) for a process that does not run as root.
func CheckMode(fi os.FileInfo) error {
	perm := fi.Mode().Perm()
	uid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		uid = int(st.Uid)
	}
	return modeProblem(perm, uid)
}

// ModeError is a secret file's mode that CheckMode refuses, with the
// chmod that mends it.
type ModeError struct {
	Problem string // "mode 0644 lets other users read it"
	Chmod   string // "600"
}

func (e *ModeError) Error() string { return e.Problem + " (chmod " + e.Chmod + " the file)" }

func modeProblem(perm os.FileMode, uid int) error {
	switch {
	case perm&0o007 != 0:
		return &ModeError{fmt.Sprintf("mode %04o lets other users %s it", perm, verbs(perm)), "600"}
	case perm&0o070 == 0, uid == 0 && perm&0o020 == 0:
		return nil
	case uid == 0:
		return &ModeError{fmt.Sprintf("mode %04o lets its group %s it", perm, verbs(perm>>3)), "640"}
	default:
		return &ModeError{fmt.Sprintf("mode %04o lets its group %s it, and its owner is not root", perm, verbs(perm>>3)), "600"}
	}
}

// verbs names what the low three bits of perm allow.
func verbs(perm os.FileMode) string {
	var v []string
	for _, b := range []struct {
		bit  os.FileMode
		verb string
	}{{0o4, "read"}, {0o2, "write"}, {0o1, "execute"}} {
		if perm&b.bit != 0 {
			v = append(v, b.verb)
		}
	}
	return strings.Join(v, " and ")
}
