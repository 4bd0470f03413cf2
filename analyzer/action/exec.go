package action

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Runner runs a command from an argument list (never through a shell) and
// returns its standard output.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands on this machine.
type ExecRunner struct {
	// Timeout bounds each command (default 30s): a hung slurmctld must not
	// hang the analyzer.
	Timeout time.Duration
}

// Run implements Runner. The error carries the command's standard error.
func (r ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	t := r.Timeout
	if t <= 0 {
		t = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}
