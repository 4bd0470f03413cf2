package drain

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// fault is a gpu_fault finding as the detector writes it (analyzer/detect
// gpu_fault.go): the evidence keys it sets, the GPU, the first fault.
func fault(host, job, gpu string, ago time.Duration, ev map[string]float64) finding.Finding {
	return finding.Finding{Pattern: schema.GPUFault, Hostname: host, Job: job, Scheduler: schema.SchedulerSlurm, GPU: gpu,
		Start: now.Add(-ago), End: now.Add(-ago + 10*time.Minute), Evidence: ev}
}

// shared is one fault of a GPU as each of its holders' findings has it.
func shared(gpu string, ago time.Duration, jobs ...string) []finding.Finding {
	out := make([]finding.Finding, len(jobs))
	for i, j := range jobs {
		out[i] = fault("n1", j, gpu, ago, xid(79))
	}
	return out
}

// noUUID is f as data without the GPU's UUID has it.
func noUUID(f finding.Finding) finding.Finding {
	f.GPU, f.GPUs = "", nil
	return f
}

func xid(code int) map[string]float64 {
	return map[string]float64{"xid": float64(code), "xid_count": 1}
}

func TestHardware(t *testing.T) {
	for _, c := range []struct {
		name string
		f    finding.Finding
		want bool
	}{
		{"XID 79 fallen off the bus", fault("n1", "1", "GPU-a", time.Hour, xid(79)), true},
		{"XID 48 double-bit ECC", fault("n1", "1", "GPU-a", time.Hour, xid(48)), true},
		{"uncorrectable ECC without XID", fault("n1", "1", "GPU-a", time.Hour, map[string]float64{"ecc_dbe": 1}), true},
		{"row-remap failure", fault("n1", "1", "GPU-a", time.Hour, map[string]float64{"row_remap_failure": 1}), true},
		{"driver XID 119 (GSP timeout) is not the board", fault("n1", "1", "GPU-a", time.Hour, xid(119)), false},
		{"an XID gpuwatch does not know", fault("n1", "1", "GPU-a", time.Hour, xid(999)), false},
		{"unknown evidence", fault("n1", "1", "GPU-a", time.Hour, map[string]float64{"xid": 79, "unknown": 1}), false},
		{"no host", fault("", "1", "GPU-a", time.Hour, xid(79)), false},
	} {
		if _, got := Hardware(&c.f); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	app := fault("n1", "1", "GPU-a", time.Hour, xid(13))
	app.Pattern = schema.AppXID
	if _, ok := Hardware(&app); ok {
		t.Error("an application's XID 13 counted as a hardware fault")
	}
}

func TestPlan(t *testing.T) {
	on := policy.OutOfService{Enabled: true, DryRun: false, Faults: 2, Window: 7 * 24 * time.Hour, OnRowRemapFailure: true}
	retry := policy.Retry{InitialBackoff: 5 * time.Minute, MaxBackoff: time.Hour, MaxAttempts: 3}
	key := FindingKey(schema.SchedulerSlurm, "n1")
	two := []finding.Finding{fault("n1", "1", "GPU-a", 3*time.Hour, xid(79)), fault("n1", "2", "GPU-b", time.Hour, xid(48))}
	lastAt := func(ago time.Duration, st audit.State, attempts int) map[string]audit.Record {
		return map[string]audit.Record{key: {Key: "k", Episode: now.Add(-ago), State: st, Attempts: attempts,
			Finished: now.Add(-2 * time.Minute), Detail: "scontrol: error"}}
	}
	cases := []struct {
		name   string
		pol    func(o *policy.OutOfService)
		fs     []finding.Finding
		last   map[string]audit.Record
		wired  bool
		want   string // "" for no decision, else kind:faults:trigger job
		reason string
	}{
		{"off by default", func(o *policy.OutOfService) { o.Enabled = false }, two, nil, true, "", ""},
		{"two hardware faults", nil, two, nil, true, "act:2:2", "2 hardware faults"},
		{"one is not enough", nil, two[:1], nil, true, "", ""},
		{"an application XID never counts", nil, []finding.Finding{two[0], func() finding.Finding {
			f := fault("n1", "3", "GPU-c", time.Hour, xid(13))
			f.Pattern = schema.AppXID
			return f
		}()}, nil, true, "", ""},
		{"faults on two nodes are not one node's", nil, []finding.Finding{two[0], fault("n2", "2", "GPU-b", time.Hour, xid(48))}, nil, true, "", ""},
		{"a fault older than the window", func(o *policy.OutOfService) { o.Window = 2 * time.Hour }, two, nil, true, "", ""},
		{"one row-remap failure", nil, []finding.Finding{fault("n1", "1", "GPU-a", time.Hour, map[string]float64{"row_remap_failure": 1})}, nil, true, "act:1:1", "row remapping failed"},
		{"row-remap rule off", func(o *policy.OutOfService) { o.OnRowRemapFailure = false },
			[]finding.Finding{fault("n1", "1", "GPU-a", time.Hour, map[string]float64{"row_remap_failure": 1})}, nil, true, "", ""},
		{"dry run", func(o *policy.OutOfService) { o.DryRun = true }, two, nil, true, "act:2:2:dry", ""},
		{"exempt node", func(o *policy.OutOfService) { o.ExemptNodes = []string{"n*"} }, two, nil, true, "note:2:2", ReasonExempt},
		{"no actuator", nil, two, nil, false, "note:2:2", ReasonNoActuator},
		// The operator resumed the node after the drain triggered by the
		// second fault: the same faults never drain it again.
		{"operator's undo is not fought", nil, two, lastAt(time.Hour, audit.Done, 1), true, "", ""},
		{"a new fault alone after the undo", nil, append(two[:2:2], fault("n1", "4", "GPU-d", 10*time.Minute, xid(79))),
			lastAt(time.Hour, audit.Done, 1), true, "", ""},
		{"two new faults after the undo", nil, append(two[:2:2], fault("n1", "4", "GPU-d", 20*time.Minute, xid(79)), fault("n1", "5", "GPU-e", 10*time.Minute, xid(95))),
			lastAt(time.Hour, audit.Done, 1), true, "act:2:5", ""},
		{"in flight: reconcile first", nil, two, lastAt(time.Hour, audit.Intended, 1), true, "", ""},
		{"failed: waits for its backoff", nil, two, lastAt(time.Hour, audit.Failed, 1), true, "hold:2:2", ReasonBackoff},
		{"failed: retried after it", func(o *policy.OutOfService) {}, two, func() map[string]audit.Record {
			m := lastAt(time.Hour, audit.Failed, 1)
			r := m[key]
			r.Finished = now.Add(-6 * time.Minute)
			m[key] = r
			return m
		}(), true, "act:2:2", "retrying"},
		{"failed: given up", nil, two, lastAt(time.Hour, audit.Failed, 3), true, "note:2:2", ReasonGaveUp},
		// A shared GPU's holders (time-slicing, MPS, vGPU, MIG instances)
		// each have a finding of its fault: one fault all the same.
		{"three pods on one time-sliced GPU, one XID 79", nil, shared("GPU-a", 3*time.Hour, "ns/a", "ns/b", "ns/c"), nil, true, "", ""},
		{"the shared GPU and another GPU", nil, append(shared("GPU-a", 3*time.Hour, "ns/a", "ns/b", "ns/c"), fault("n1", "ns/d", "GPU-b", time.Hour, xid(48))),
			nil, true, "act:2:ns/d", "a shared GPU's holders counted as one fault"},
		{"holders listed in any order", nil, []finding.Finding{fault("n1", "ns/c", "GPU-a", 2*time.Hour+55*time.Minute, xid(79)), fault("n1", "ns/d", "GPU-b", time.Hour, xid(48)),
			fault("n1", "ns/a", "GPU-a", 3*time.Hour, xid(79))}, nil, true, "act:2:ns/d", ""},
		{"MIG instances of one GPU", nil, []finding.Finding{fault("n1", "ns/a", "GPU-a/1", time.Hour, xid(79)), fault("n1", "ns/b", "GPU-a/2", time.Hour, xid(79))}, nil, true, "", ""},
		{"MIG instances of two GPUs", nil, []finding.Finding{fault("n1", "ns/a", "GPU-a/1", time.Hour, xid(79)), fault("n1", "ns/b", "GPU-b/1", time.Hour, xid(79))}, nil, true, "act:2:ns/b", ""},
		{"holders without a UUID", nil, []finding.Finding{noUUID(fault("n1", "ns/a", "", time.Hour, xid(79))), noUUID(fault("n1", "ns/b", "", time.Hour, xid(79))), noUUID(fault("n1", "ns/c", "", time.Hour, xid(79)))},
			nil, true, "", ""},
		{"vGPU copies of one pod", nil, []finding.Finding{fault("n1", "ns/a", "GPU-a", time.Hour, xid(79)), fault("n1", "ns/a", "GPU-a::1", time.Hour, xid(79))}, nil, true, "", ""},
		{"the same GPU faulting again after it was quiet", nil, []finding.Finding{fault("n1", "1", "GPU-a", 3*time.Hour, xid(79)), fault("n1", "2", "GPU-a", time.Hour, xid(79))}, nil, true, "act:2:2", ""},
		{"a holder's row-remap failure makes the shared fault one", nil, []finding.Finding{fault("n1", "ns/a", "GPU-a", time.Hour, xid(79)),
			fault("n1", "ns/b", "GPU-a", 55*time.Minute, map[string]float64{"row_remap_failure": 1})}, nil, true, "act:1:ns/a", "row remapping failed"},
		// After the operator's undo, one new fault seen by three holders
		// is one new fault: not enough.
		{"a new shared fault after the undo", nil, append(two[:2:2], shared("GPU-c", 30*time.Minute, "ns/x", "ns/y", "ns/z")...), lastAt(time.Hour, audit.Done, 1), true, "", ""},
		// A holder that saw the old fault later does not bring it back.
		{"a late holder of a fault already acted on", nil, append(two[:2:2], fault("n1", "ns/late", "GPU-b", 55*time.Minute, xid(48))),
			lastAt(time.Hour, audit.Done, 1), true, "", ""},
		{"a late holder of a fault that left the window", func(o *policy.OutOfService) { o.Window = 2*time.Hour + 58*time.Minute },
			append(shared("GPU-a", 3*time.Hour, "ns/a"), fault("n1", "ns/late", "GPU-a", 2*time.Hour+55*time.Minute, xid(79)), fault("n1", "ns/d", "GPU-b", time.Hour, xid(48))),
			nil, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := on
			if c.pol != nil {
				c.pol(&o)
			}
			in := Input{Policy: o, Retry: retry, Last: c.last, Now: now, Wired: func(string) bool { return c.wired }}
			for i := range c.fs {
				if f, ok := Hardware(&c.fs[i]); ok {
					in.Faults = append(in.Faults, f)
				}
			}
			ds := Plan(in)
			got := ""
			if len(ds) > 1 {
				t.Fatalf("%d decisions for one node: %+v", len(ds), ds)
			}
			if len(ds) == 1 {
				d := ds[0]
				got = [...]string{"act", "note", "hold"}[d.Kind] + ":" + strconv.Itoa(d.Faults) + ":" + d.Trigger.Finding.Job
				if d.DryRun {
					got += ":dry"
				}
				if c.reason != "" && !strings.Contains(d.Reason, c.reason) {
					t.Errorf("reason %q, want %q", d.Reason, c.reason)
				}
			}
			if got != c.want {
				t.Errorf("decision %q, want %q", got, c.want)
			}
		})
	}
}

// TestDistinct: the holders' faults of one GPU fold into the first
// holder's, with their number, and a row-remap failure any of them saw.
func TestDistinct(t *testing.T) {
	fs := append(shared("GPU-a", time.Hour, "ns/b", "ns/a"), fault("n1", "ns/c", "GPU-a", 58*time.Minute, map[string]float64{"row_remap_failure": 1}),
		fault("n1", "ns/d", "GPU-b", time.Hour, xid(48)))
	var in []Fault
	for i := range fs {
		f, ok := Hardware(&fs[i])
		if !ok {
			t.Fatalf("%s: not a hardware fault", fs[i].Job)
		}
		in = append(in, f)
	}
	got := Distinct(in)
	if len(got) != 2 {
		t.Fatalf("%d faults, want 2: %+v", len(got), got)
	}
	a, b := got[0], got[1]
	if a.Finding.Job != "ns/a" || a.Holders != 3 || !a.RowRemap || !a.At.Equal(now.Add(-time.Hour)) {
		t.Errorf("GPU-a: job %s, %d holders, row remap %v, at %s; want ns/a, 3, true, an hour ago", a.Finding.Job, a.Holders, a.RowRemap, a.At)
	}
	if b.Finding.Job != "ns/d" || b.Holders != 1 || b.RowRemap {
		t.Errorf("GPU-b: %+v", b)
	}
}
