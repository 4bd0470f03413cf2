package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Processes kills orphaned GPU processes on this host: SIGTERM, then SIGKILL
// after a grace time. A PID is signalled only when, right before, NVML lists
// it with memory on the finding's GPU, /proc shows the command the evidence
// named and a process that started before the orphan was first seen (so a
// reused PID is never hit), and no live allocation owns it. A Prometheus
// series alone never gets a process killed: without NVML nothing is.
type Processes struct {
	// GPUs is the node's NVML; nil refuses every kill.
	GPUs GPUProcesses
	// JobActive asks the scheduler whether a job named by the process's
	// cgroup or environment still runs; nil refuses such processes.
	JobActive func(ctx context.Context, job string) (bool, error)
	// Hostname is this host; orphans elsewhere are another analyzer's.
	Hostname string
	// ProcRoot is /proc, or a fake tree in tests.
	ProcRoot string
	Grace    time.Duration
	// Signal sends a signal (syscall.Kill when nil).
	Signal func(pid int, sig syscall.Signal) error
	// Poll is how often a terminating process is checked (default 100ms).
	Poll time.Duration
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports.
const clockTicks = 100

// Name implements Actuator.
func (p *Processes) Name() string { return "process" }

func (p *Processes) root() string { return orDefault(p.ProcRoot, "/proc") }

// StartTime returns when pid started, or ok=false when there is no such
// live process (zombies count as gone: they hold no GPU memory).
func (p *Processes) StartTime(pid int) (time.Time, bool, error) {
	data, err := os.ReadFile(filepath.Join(p.root(), strconv.Itoa(pid), "stat"))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	// The command name is in parentheses and may itself hold spaces and
	// parentheses: fields are counted after the last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return time.Time{}, false, fmt.Errorf("stat of pid %d: malformed", pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return time.Time{}, false, fmt.Errorf("stat of pid %d: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return time.Time{}, false, nil
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("stat of pid %d: starttime: %w", pid, err)
	}
	boot, err := p.bootTime()
	if err != nil {
		return time.Time{}, false, err
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), true, nil
}

func (p *Processes) bootTime() (time.Time, error) {
	data, err := os.ReadFile(filepath.Join(p.root(), "stat"))
	if err != nil {
		return time.Time{}, fmt.Errorf("read boot time: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("boot time %q: %w", v, err)
			}
			return time.Unix(s, 0), nil
		}
	}
	return time.Time{}, errors.New("read boot time: no btime in stat")
}

// same reports whether pid is still the process that started at start.
func (p *Processes) same(pid int, start time.Time) (bool, error) {
	st, ok, err := p.StartTime(pid)
	if err != nil || !ok {
		return false, err
	}
	return st.Equal(start), nil
}

// orphan checks pid against the finding: it must be live and have started
// no later than the orphan was first seen (plus the tick's rounding).
func (p *Processes) orphan(req *Request, pid int) (time.Time, bool, error) {
	start, ok, err := p.StartTime(pid)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	if start.After(req.Finding.Start.Add(time.Second / clockTicks)) {
		return start, false, nil
	}
	return start, true, nil
}

func (p *Processes) signal(pid int, sig syscall.Signal) error {
	if p.Signal != nil {
		return p.Signal(pid, sig)
	}
	return syscall.Kill(pid, sig)
}

// Act implements Actuator for reclaim steps on orphan_process findings.
func (p *Processes) Act(ctx context.Context, req *Request) (string, error) {
	if req.Step != StepReclaim {
		return "", fmt.Errorf("process %s: %w", req.Step, ErrUnsupported)
	}
	if p.Hostname != "" && req.Finding.Hostname != p.Hostname {
		return "", fmt.Errorf("orphan on host %q, this is %q: %w", req.Finding.Hostname, p.Hostname, ErrUnsupported)
	}
	if len(req.Finding.PIDs) == 0 {
		return "", fmt.Errorf("no process ids: %w", ErrInvalid)
	}
	if p.GPUs == nil {
		return "", fmt.Errorf("%w: %w", ErrNoNVML, ErrRefused)
	}
	targets, notes, refused, err := p.targets(ctx, req)
	if err != nil {
		return "", err
	}
	if len(targets) == 0 {
		if refused {
			return "", fmt.Errorf("%s: %w", strings.Join(notes, "; "), ErrRefused)
		}
		return "", fmt.Errorf("%s: %w", strings.Join(notes, "; "), ErrGone)
	}
	for _, t := range targets {
		if err := p.signal(t.pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
			return "", fmt.Errorf("SIGTERM pid %d: %w", t.pid, err)
		}
	}
	poll := p.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	left, err := p.awaitTerm(ctx, targets, poll)
	if err != nil {
		return "", err
	}
	if len(left) == 0 {
		notes = append(notes, "all ended after SIGTERM")
		return strings.Join(notes, "; "), nil
	}
	killed, err := p.killLeft(ctx, left, poll)
	if err != nil {
		return "", err
	}
	notes = append(notes, killed...)
	return strings.Join(notes, "; "), nil
}

// procTarget is a process to end, known by its PID and start time so that
// a reused PID is never signalled.
type procTarget struct {
	pid   int
	start time.Time
}

// targets are the finding's processes that are still its orphans and that
// confirm allows to kill, with a note for each that is not; refused says
// whether confirm refused one (else those left out are gone or reused).
func (p *Processes) targets(ctx context.Context, req *Request) (targets []procTarget, notes []string, refused bool, err error) {
	for _, pid := range req.Finding.PIDs {
		if pid <= 1 {
			return nil, nil, false, fmt.Errorf("pid %d: %w", pid, ErrInvalid)
		}
		start, ok, err := p.orphan(req, pid)
		if err != nil {
			return nil, nil, false, err
		}
		if !ok {
			if start.IsZero() {
				notes = append(notes, fmt.Sprintf("pid %d gone", pid))
			} else {
				notes = append(notes, fmt.Sprintf("pid %d reused (started %s, after the evidence)", pid, start.UTC().Format(time.RFC3339)))
			}
			continue
		}
		why, err := p.confirm(ctx, req, pid)
		if err != nil {
			return nil, nil, false, err
		}
		if why != "" {
			notes = append(notes, why+": not killed")
			refused = true
			continue
		}
		targets = append(targets, procTarget{pid, start})
	}
	return targets, notes, refused, nil
}

// awaitTerm polls the SIGTERMed targets until all have ended or the grace
// is over, and returns those still running.
func (p *Processes) awaitTerm(ctx context.Context, targets []procTarget, poll time.Duration) ([]procTarget, error) {
	deadline := time.NewTimer(p.Grace)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		var left []procTarget
		for _, t := range targets {
			same, err := p.same(t.pid, t.start)
			if err != nil {
				return nil, err
			}
			if same {
				left = append(left, t)
			}
		}
		targets = left
		if len(targets) == 0 {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for pids to end: %w", ctx.Err())
		case <-tick.C:
			continue
		case <-deadline.C:
		}
		return targets, nil
	}
}

// killLeft SIGKILLs the targets that outlived the grace and waits for each
// to disappear, returning a note per process killed.
func (p *Processes) killLeft(ctx context.Context, targets []procTarget, poll time.Duration) ([]string, error) {
	var notes []string
	for _, t := range targets {
		// Checked once more right before SIGKILL: the PID must still be ours.
		same, err := p.same(t.pid, t.start)
		if err != nil {
			return nil, err
		}
		if !same {
			continue
		}
		if err := p.signal(t.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("SIGKILL pid %d: %w", t.pid, err)
		}
		// SIGKILL is delivered asynchronously: confirm before reporting.
		if err := p.waitGone(ctx, t.pid, t.start, poll); err != nil {
			return nil, err
		}
		notes = append(notes, fmt.Sprintf("pid %d killed after %s grace", t.pid, p.Grace))
	}
	return notes, nil
}

// killWait bounds the wait for a SIGKILLed process to disappear (a process
// in uninterruptible sleep, e.g. stuck in the GPU driver, can take a while).
const killWait = 10 * time.Second

func (p *Processes) waitGone(ctx context.Context, pid int, start time.Time, poll time.Duration) error {
	deadline := time.Now().Add(killWait)
	for {
		same, err := p.same(pid, start)
		if err != nil || !same {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d still present %s after SIGKILL", pid, killWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for pid %d after SIGKILL: %w", pid, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// Reconcile implements Reconciler: the kill took effect when none of the
// orphans is still alive.
func (p *Processes) Reconcile(ctx context.Context, req *Request) (Outcome, string, error) {
	for _, pid := range req.Finding.PIDs {
		_, ok, err := p.orphan(req, pid)
		if err != nil {
			return 0, "", err
		}
		if ok {
			return NotApplied, fmt.Sprintf("pid %d still alive", pid), nil
		}
	}
	return Applied, "no orphan left", nil
}
