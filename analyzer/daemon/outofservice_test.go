package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
)

// faultingNodeFaults are the XIDs of the out_of_service tests' node: the
// application's 13, then the hardware's 48 and 94 (two faults by 1h40m),
// 79 and 95 (two more by 3h50m), each on a GPU of its own job.
const faultingNodeFaults = `
faults:
  - {kind: xid, node: %[1]s, gpus: [2], at: 30m, xid: 13}
  - {kind: xid, node: %[1]s, gpus: [1], at: 60m, xid: 48}
  - {kind: xid, node: %[1]s, gpus: [3], at: 100m, xid: 94}
  - {kind: xid, node: %[1]s, gpus: [4], at: 200m, xid: 79}
  - {kind: xid, node: %[1]s, gpus: [5], at: 230m, xid: 95}
`

// outOfServiceRun steps d every 5 minutes over 5 hours from origin, with
// the out_of_service policy in dry run until 2h and live after it, act
// taking nodes of scheduler out. After each cycle out says whether the
// node is out of service (and puts it back, as an operator would). It
// returns the cycles after which the node was out, and the audit log's
// drain steps as "at:state:job", each done step's detail checked to hold
// want.
func outOfServiceRun(t *testing.T, r *rig, d *Daemon, origin time.Time, scheduler string, act action.Actuator,
	out func() bool, want string) (map[time.Duration]bool, []string) {
	t.Helper()
	ctx := context.Background()
	polDoc := func(dry bool) *policy.Policy {
		p, err := policy.Parse([]byte(fmt.Sprintf("dry_run: true\nout_of_service: {enabled: true, dry_run: %v}\ntiers: [{name: all}]\n", dry)))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	r.esc.Policy = polDoc(true)
	r.esc.Actuators[act.Name()] = act
	d.Drainer = &Drainer{Policy: r.esc.Policy, Log: r.log, History: r.st, Actuators: map[string]action.Actuator{scheduler: act}}
	taken := map[time.Duration]bool{}
	for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5 * time.Hour)); now = now.Add(5 * time.Minute) {
		at := now.Sub(origin)
		if at == 2*time.Hour {
			// The policy goes live: dry-run records do not stand for real steps.
			d.Drainer.Policy, r.esc.Policy = polDoc(false), polDoc(false)
		}
		d.Now = func() time.Time { return now }
		if _, err := d.RunOnce(ctx); err != nil {
			t.Fatalf("cycle at +%s: %v", at, err)
		}
		if out() {
			taken[at] = true
		}
	}
	evs, err := r.log.Events(ctx, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		if e.Step == action.StepDrain {
			got = append(got, fmt.Sprintf("%s:%s:%s", e.At.Sub(origin), e.State, e.Job))
			if e.State == audit.Done && (!strings.Contains(e.Detail, "2 hardware faults") || !strings.Contains(e.Detail, want)) {
				t.Errorf("done step's detail %q, want 2 hardware faults and %q", e.Detail, want)
			}
		}
		if testing.Verbose() {
			t.Logf("%s %s %s %s %s", e.At.Sub(origin), e.Step, e.State, e.Job, e.Detail)
		}
	}
	return taken, got
}
