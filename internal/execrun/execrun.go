// Package execrun runs other programs (squeue, scancel, scontrol, sacct,
// sacctmgr) from argument lists, never through a shell, each bounded in
// time as a whole process group.
//
// A wrapper script that starts children (a site's squeue that runs
// `sleep`, an ssh to the controller) must not hold a cycle past its
// timeout: the command runs in a process group of its own, the whole group
// is killed at the deadline, and WaitDelay stops waiting for output pipes
// that a grandchild keeps open.
package execrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Runner runs a command from an argument list and returns its standard
// output.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// Defaults of Exec.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultWaitDelay = 2 * time.Second
	// MaxOutput bounds what is kept of a command's standard output; more
	// fails the command (a squeue of every job of a large cluster is a few
	// megabytes).
	MaxOutput = 64 << 20
	// maxStderr bounds the standard error kept for the error message.
	maxStderr = 4 << 10
)

// ErrTooLarge is returned when a command writes more than MaxOutput.
var ErrTooLarge = errors.New("output larger than the limit")

// Exec runs commands on this machine.
type Exec struct {
	// Timeout bounds each command (default DefaultTimeout): a hung
	// slurmctld must not hang the analyzer.
	Timeout time.Duration
	// WaitDelay bounds the wait for the output pipes once the process
	// group was killed (default DefaultWaitDelay).
	WaitDelay time.Duration
}

// Run implements Runner. The error carries the first line of the
// command's standard error.
func (r Exec) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	t := r.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	wd := r.WaitDelay
	if wd <= 0 {
		wd = DefaultWaitDelay
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		// The negative pid is the process group: the wrapper and every
		// child it started.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	cmd.WaitDelay = wd
	out := &limited{max: MaxOutput}
	errb := &limited{max: maxStderr}
	cmd.Stdout, cmd.Stderr = out, errb
	err := cmd.Run()
	if cmd.Process != nil {
		// Whatever the command left behind in its group (a child that
		// kept the pipes open past WaitDelay) goes with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// The command itself exited 0; only a child held its output open.
		err = nil
	}
	if out.over {
		return nil, fmt.Errorf("%s: %w (%d bytes)", name, ErrTooLarge, MaxOutput)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w after %s (process group killed)", context.DeadlineExceeded, t)
		}
		return out.b.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, firstLine(errb.b.String()))
	}
	return out.b.Bytes(), nil
}

// firstLine is the first non-empty line of a command's standard error,
// and the last one too when there are several: squeue's fatal error spans
// lines ("error: resolve_ctls_from_dns_srv: …", then "fatal: Could not
// establish a configuration source"), and the two ends say it.
func firstLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	switch len(lines) {
	case 0:
		return ""
	case 1:
		return lines[0]
	}
	return lines[0] + " … " + lines[len(lines)-1]
}

// limited keeps at most max bytes and remembers that more came.
type limited struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (l *limited) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); len(p) > room {
		l.over = true
		if room > 0 {
			l.b.Write(p[:room])
		}
		return len(p), nil
	}
	return l.b.Write(p)
}

var _ io.Writer = (*limited)(nil)
