package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/escalation"
)

// catchAll reclaims every cpu_only job and needs no fact to choose its tier.
const catchAll = `
dry_run: false
min_warning: 0s
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: all
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s, channels: [webhook]}
          - {action: warn, after: 0s, channels: [webhook]}
          - {action: reclaim, after: 10m}
`

// A job id that names another workload (the job under it runs on another
// node) gets no step at all over an hour of cycles, not even a
// notification to that workload's owner; the audit holds one target note
// for the episode and the log says so once.
func TestMismatchTakesNoStep(t *testing.T) {
	t.Parallel()
	r := newRig(t, catchAll, nil)
	var logs bytes.Buffer
	r.esc.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	r.esc.Facts.(*ownerFacts).elsewhere = true
	unproven := 0
	for m := 0; m <= 60; m += 5 {
		unproven += r.cycle(t, m, idle("7", "bob", "dev", r.start.Add(0))).Unproven
	}
	if len(r.slurm.calls) != 0 || len(r.hook.calls) != 0 || unproven != 13 {
		t.Fatalf("slurm %v, webhook %v, unproven %d", r.slurm.calls, r.hook.calls, unproven)
	}
	n := stepCounts(t, r.log, "7")
	if len(n) != 2 || n[escalation.NoteTarget+":skipped"] != 1 {
		t.Fatalf("audit %v, want one target note", n)
	}
	evs, _ := r.log.Events(context.Background(), audit.Filter{Job: "7"})
	if d := evs[1].Detail; !strings.Contains(d, `host "n1" in job 7's nodes [n-other]`) {
		t.Fatalf("note %q", d)
	}
	if c := strings.Count(logs.String(), "target not proven"); c != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", c, logs.String())
	}
}

// When the scheduler cannot be asked, nothing can be compared: whatever the
// tiers need (here nothing), at most the notification goes out.
func TestUnknownTargetAtMostNotifies(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"down", "gone"} {
		r := newRig(t, catchAll, nil)
		o := r.esc.Facts.(*ownerFacts)
		o.down, o.gone = how == "down", how == "gone"
		for m := 0; m <= 60; m += 5 {
			r.cycle(t, m, idle("7", "bob", "dev", r.start))
		}
		if len(r.slurm.calls) != 0 || r.hook.count("warn") != 0 || r.hook.count("notify") != 1 {
			t.Fatalf("%s: slurm %v, webhook %v; want one notify only", how, r.slurm.calls, r.hook.calls)
		}
		if n := stepCounts(t, r.log, "7"); n[escalation.NoteFacts+":skipped"] != 1 {
			t.Fatalf("%s: audit %v, want a facts note", how, n)
		}
	}
}
