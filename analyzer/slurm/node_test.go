package slurm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestNodeFromRecordedSinfo reads the node state Slurm 22.05's sinfo
// --json printed before and after `scontrol update State=DRAIN`.
func TestNodeFromRecordedSinfo(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		file    string
		drained bool
		reason  string
	}{
		{"testdata/sinfo-22.05-idle.json", false, ""},
		{"testdata/sinfo-22.05-drained.json", true, "gpuwatch: GPU-6a1c XID 79 (GPU has fallen off the bus)"},
	} {
		cl := &Client{Runner: recorded{"sinfo": c.file}}
		n, err := cl.Node(ctx, "vm")
		if err != nil || n == nil {
			t.Fatalf("%s: %v %v", c.file, n, err)
		}
		if n.State != "IDLE" || n.Drained() != c.drained || n.Reason != c.reason {
			t.Errorf("%s: node %+v, want drained=%v reason %q", c.file, n, c.drained, c.reason)
		}
		// sinfo --json lists every node whatever -n says: one not in
		// the list is no node.
		if n, err := cl.Node(ctx, "gpu-other"); n != nil || err != nil {
			t.Errorf("%s: another node: %v %v", c.file, n, err)
		}
	}
}

func TestDrainRefusedBeforeAnyCommand(t *testing.T) {
	c := &Client{Runner: recorded{}}
	ctx := context.Background()
	for _, name := range []string{"", "gpu[01-04]", "a,b", "-x", "node 1", strings.Repeat("n", 64)} {
		if err := c.Drain(ctx, name, "r"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Drain(%q): %v", name, err)
		}
		if _, err := c.Node(ctx, name); !errors.Is(err, ErrInvalid) {
			t.Errorf("Node(%q): %v", name, err)
		}
	}
	for _, reason := range []string{"", "two\nlines", strings.Repeat("r", MaxReasonBytes+1)} {
		if err := c.Drain(ctx, "gpu01", reason); !errors.Is(err, ErrInvalid) {
			t.Errorf("Drain reason %q: %v", reason, err)
		}
	}
}
