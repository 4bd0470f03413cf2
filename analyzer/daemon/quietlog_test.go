package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// A finding whose facts are missing is logged once per episode, not once per
// cycle: the demo logged the same warning 1,056 times.
func TestMissingFactsLoggedOncePerEpisode(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	var buf bytes.Buffer
	r.esc.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	r.esc.Facts.(*ownerFacts).down = true
	j := idle("9", "bob", "dev", r.start)
	for m := 0; m <= 60; m += 5 {
		if res := r.cycle(t, m, j); res.MissingFacts != 1 {
			t.Fatalf("+%dm: MissingFacts = %d, want 1 (each cycle still counts it)", m, res.MissingFacts)
		}
	}
	if n := strings.Count(buf.String(), "facts missing"); n != 1 {
		t.Fatalf("13 cycles of one episode logged %d warnings, want 1:\n%s", n, buf.String())
	}
	// The finding goes away (the episode ends) and comes back: a new
	// episode, logged again.
	r.cycle(t, 65)
	r.cycle(t, 70, j)
	r.cycle(t, 75, j)
	if n := strings.Count(buf.String(), "facts missing"); n != 2 {
		t.Fatalf("two episodes logged %d warnings, want 2:\n%s", n, buf.String())
	}
}

// A job its scheduler no longer knows has ended, the usual fate of a
// finished job: its facts are missing all the same (at most a notice), but
// the log says so at info, not as a warning an operator must look into.
func TestGoneJobLoggedAtInfo(t *testing.T) {
	t.Parallel()
	r := newRig(t, testPolicy, nil)
	var buf bytes.Buffer
	r.esc.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	r.esc.Facts.(*ownerFacts).gone = true
	j := idle("9", "bob", "dev", r.start)
	for m := 0; m <= 10; m += 5 {
		if res := r.cycle(t, m, j); res.MissingFacts != 1 {
			t.Fatalf("+%dm: MissingFacts = %d, want 1", m, res.MissingFacts)
		}
	}
	out := buf.String()
	if strings.Contains(out, "level=WARN") || strings.Count(out, "level=INFO msg=\"job gone") != 1 {
		t.Fatalf("a gone job: want one info line and no warning, got:\n%s", out)
	}
}
