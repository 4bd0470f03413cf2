package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/escalation"
	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/analyzer/slurm"
	"github.com/gpuwatch/gpuwatch/analyzer/target"
	"github.com/gpuwatch/gpuwatch/internal/execrun"
	"github.com/gpuwatch/gpuwatch/internal/testtool"
	"github.com/gpuwatch/gpuwatch/schema"
)

// withLabel sets a label on every series of a scrape, as Prometheus'
// external labels do where one holds several clusters.
func withLabel(name, value string) func([]*dto.MetricFamily) {
	return func(fams []*dto.MetricFamily) {
		for _, f := range fams {
			for _, m := range f.Metric {
				set := false
				for _, lp := range m.Label {
					if lp.GetName() == name {
						lp.Value, set = &value, true
					}
				}
				if !set {
					n, v := name, value
					m.Label = append(m.Label, &dto.LabelPair{Name: &n, Value: &v})
				}
			}
		}
	}
}

// A job id is only an id within its cluster and its controller's life. On
// the real Slurm of test/slurm/start.sh, a job holding a GPU is the target
// of the engine's cpu_only finding from simulated idle telemetry whose
// hpc_job is the job's id: acted on (warned, signalled, cancelled) only
// when the telemetry's host is the job's node, the job started before the
// evidence, and the cluster the series name is the local one. Otherwise
// nothing at all is done, not even a warning, the job keeps running, and
// the audit holds one target note saying what was compared.
func TestTargetProvenOnRealSlurm(t *testing.T) {
	useTestSlurm(t, true)
	ctx := context.Background()
	sl := &slurm.Client{Runner: execrun.Exec{Timeout: 30 * time.Second}}
	node := slurmNode(t, sl)
	for i, tc := range []struct {
		name string
		// host of the telemetry; "" is the job's own node.
		host string
		// evidence < 0: the telemetry begins that long before the job
		// started; else at the first analysis step after its start.
		evidence time.Duration
		// series is the series' cluster label ("" none, "=" the real
		// cluster's name); flag is --slurm.cluster ("=" the real one).
		series, flag string
		want         string // in the target note; "" when the job is cancelled
	}{
		{name: "another node's telemetry", host: "node-b", evidence: time.Minute, want: `host "node-b" in job`},
		{name: "cluster b, --slurm.cluster a", evidence: time.Minute, series: "b", flag: "a", want: `squeue reports`},
		{name: "cluster b, local cluster", evidence: time.Minute, series: "b", flag: "=", want: `the series say "b"`},
		{name: "job started after the evidence", evidence: -time.Hour, want: "started"},
		{name: "its own node, cluster agreeing", evidence: time.Minute, series: "=", flag: "="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each its own job, by its id
			id, marker := testtool.SubmitSignalJob(t, t.TempDir(), fmt.Sprintf("target-%d", i))
			j, err := sl.Job(ctx, id)
			if err != nil || j == nil || j.Start.IsZero() {
				t.Fatalf("job %s: %+v %v", id, j, err)
			}
			real := func(s string) string {
				if s == "=" {
					return j.Cluster
				}
				return s
			}
			host := tc.host
			if host == "" {
				host = node
			}
			// On a step's boundary: the engine dates the evidence of a
			// device whose data begins with the allocation to its step.
			step := config.Default().Step.D()
			origin := j.Start.Truncate(step).Add(step)
			if tc.evidence < 0 {
				origin = j.Start.Truncate(step).Add(tc.evidence)
			}
			scenario := fmt.Sprintf(`
name: target
fleet: [{hostname: %q, model: H100-SXM5-80GB, gpus: 1}]
workloads:
  - {id: %q, user: bob, account: dev-vision, node: %q, gpus: [0], start: 0s, duration: 10h, behaviour: cpu_only}
`, host, id, host)
			var relabel []func([]*dto.MetricFamily)
			if tc.series != "" {
				relabel = append(relabel, withLabel(schema.LabelCluster, real(tc.series)))
			}
			r, d := engineRigFor(t, scenario, origin, 0, 0, relabel...)
			pol, err := policy.Parse([]byte(strings.ReplaceAll(enginePolicy, "accounts: [dev-*]", "partitions: [debug]")))
			if err != nil {
				t.Fatal(err)
			}
			r.esc.Policy, r.esc.SlurmCluster = pol, real(tc.flag)
			r.esc.Actuators["slurm"] = &action.Slurm{Runner: execrun.Exec{Timeout: 30 * time.Second}, Cluster: real(tc.flag)}
			r.esc.Facts = &facts.Resolver{Sources: map[string]facts.Source{schema.SchedulerSlurm: &facts.SlurmSource{Runner: execrun.Exec{Timeout: 30 * time.Second}}}}
			unproven := 0
			for now := origin.Add(5 * time.Minute); !now.After(origin.Add(5*time.Hour + 30*time.Minute)); now = now.Add(5 * time.Minute) {
				d.Now = func() time.Time { return now }
				res, err := d.RunOnce(ctx)
				if err != nil {
					t.Fatalf("cycle at %s: %v", now.Sub(origin), err)
				}
				unproven += res.Unproven
			}
			checkTargetAudit(t, r, id, tc.want, unproven)
			st, _ := sl.Job(ctx, id)
			if tc.want != "" {
				if st == nil || st.State != "RUNNING" {
					t.Fatalf("job %s is %+v: another workload's finding cancelled it", id, st)
				}
				if b, _ := os.ReadFile(marker); len(b) > 0 {
					t.Fatalf("job %s was signalled on another workload's evidence", id)
				}
				return
			}
			if st != nil && slurm.Active(st.State) {
				t.Fatalf("job %s still %s: its own finding did not cancel it", id, st.State)
			}
		})
	}
}

// checkTargetAudit: with want, the job's audit is exactly one target note
// saying want and no step (the webhook got nothing either); without, the
// job was warned, signalled and cancelled, each step carrying its proof.
func checkTargetAudit(t *testing.T, r *rig, id, want string, unproven int) {
	t.Helper()
	evs, err := r.log.Events(context.Background(), audit.Filter{Job: id})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, e := range evs {
		steps = append(steps, e.Step+":"+string(e.State))
	}
	if want != "" {
		if got := strings.Join(steps, " "); got != escalation.NoteTarget+":intended "+escalation.NoteTarget+":skipped" {
			t.Fatalf("audit %s, want one target note and no step", got)
		}
		if !strings.Contains(evs[1].Detail, want) || !strings.Contains(evs[1].Detail, "MISMATCH") {
			t.Fatalf("target note %q does not say %q", evs[1].Detail, want)
		}
		if len(r.hook.calls) != 0 || unproven == 0 {
			t.Fatalf("webhook calls %v, unproven %d", r.hook.calls, unproven)
		}
		// The note's record holds the finding and the whole proof.
		rec, ok, err := r.log.Get(context.Background(), evs[1].Key)
		var p struct{ Target *target.Proof }
		if err != nil || !ok || json.Unmarshal([]byte(rec.Payload), &p) != nil || p.Target == nil || p.Target.Verdict != target.Mismatch {
			t.Fatalf("target note payload %q (%v %v)", rec.Payload, ok, err)
		}
		return
	}
	if got, w := strings.Join(steps, " "), "warn:intended warn:done checkpoint:intended checkpoint:done reclaim:intended reclaim:done"; got != w {
		t.Fatalf("audit %s, want %s: %+v", got, w, evs)
	}
	for _, e := range evs {
		rec, _, err := r.log.Get(context.Background(), e.Key)
		var req action.Request
		if err != nil || json.Unmarshal([]byte(rec.Payload), &req) != nil || req.Target == nil || req.Target.Verdict != target.Proven {
			t.Fatalf("%s step without its proof: %q (%v)", e.Step, rec.Payload, err)
		}
	}
}
