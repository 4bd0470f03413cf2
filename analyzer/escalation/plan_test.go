package escalation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/policy"
	"github.com/gpuwatch/gpuwatch/schema"
)

const testPolicy = `
dry_run: false
min_warning: 20m
retry: {initial_backoff: 5m, max_backoff: 20m, max_attempts: 4}
rate_limits: {reclaims_per_cycle: 2, reclaims_per_hour: 3}
channels:
  webhook: {url: "http://hook.invalid/x"}
tiers:
  - name: prod
    match: {partitions: [prod]}
    rules:
      - pattern: cpu_only
        steps: [{action: notify, after: 0s, channels: [webhook]}, {action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 30m}]
  - name: shadow
    match: {partitions: [shadow]}
    dry_run: true
    reclaim: true
    rules:
      - pattern: cpu_only
        steps: [{action: warn, after: 0s, channels: [webhook]}, {action: reclaim, after: 0s}]
  - name: dev
    reclaim: true
    rules:
      - pattern: cpu_only
        steps:
          - {action: notify, after: 0s, channels: [webhook]}
          - {action: warn, after: 10m, channels: [webhook]}
          - {action: checkpoint, after: 20m, signal: USR1}
          - {action: reclaim, after: 40m}
exemptions:
  - {user: alice, reason: "on call"}
`

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// past builds a history entry: "done@10" (delivered, finished at +10m),
// "skip@10", "fail@10x2" (failed at +10m after 2 attempts), "flight@10"
// (intended, no outcome).
func past(s string) Past {
	kind, rest, _ := strings.Cut(s, "@")
	var m, n int
	if _, err := fmt.Sscanf(rest, "%dx%d", &m, &n); err != nil {
		fmt.Sscanf(rest, "%d", &m)
	}
	p := Past{At: t0.Add(time.Duration(m) * time.Minute), Attempts: max(n, 1)}
	switch kind {
	case "done":
		p.Delivered = true
	case "fail":
		p.Failed = true
	}
	return p
}

// summary renders a plan as "act:notify note:reclaim(why) defer:warn(why)".
func summary(steps []Step) string {
	var out []string
	for _, s := range steps {
		switch s.Kind {
		case Act:
			out = append(out, "act:"+s.Name)
		default:
			out = append(out, fmt.Sprintf("%s:%s(%s)", s.Kind, s.Name, s.Reason))
		}
	}
	return strings.Join(out, " ")
}

func TestPlan(t *testing.T) {
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		partition string // the job's partition as Slurm says; "" = facts missing
		user      string
		minute    int               // now, minutes after the episode began
		hist      map[string]string // step name -> past()
		jobTaken  []string
		budget    Budget
		unwired   []string
		want      string
	}{
		{name: "first cycle notifies only", partition: "dev", minute: 0,
			want: "act:notify defer:warn(not due)"},
		{name: "warning due after notify", partition: "dev", minute: 10, hist: map[string]string{"notify": "done@0"},
			want: "act:warn defer:checkpoint(not due)"},
		{name: "checkpoint due but warned too recently", partition: "dev", minute: 20,
			hist: map[string]string{"notify": "done@0", "warn": "done@10"},
			want: "defer:checkpoint(" + AwaitWarning + ")"},
		{name: "checkpoint after min_warning", partition: "dev", minute: 30,
			hist: map[string]string{"notify": "done@0", "warn": "done@10"},
			want: "act:checkpoint defer:reclaim(not due)"},
		{name: "reclaim keeps its spacing after a late checkpoint", partition: "dev", minute: 40,
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30"},
			want: "defer:reclaim(not due)"},
		{name: "reclaim", partition: "dev", minute: 50,
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30"},
			want: "act:reclaim"},
		{name: "never twice", partition: "dev", minute: 90,
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30", "reclaim": "done@50"}},
		{name: "in flight is not repeated", partition: "dev", minute: 90,
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30", "reclaim": "flight@50"}},
		{name: "a skipped warning is no warning", partition: "dev", minute: 60,
			hist: map[string]string{"notify": "done@0", "warn": "skip@10"},
			want: "defer:checkpoint(" + AwaitWarning + ")"},
		{name: "late cycle takes every due step at once", partition: "dev", minute: 120,
			want: "act:notify defer:warn(not due)"}, // each step keeps its spacing from the one before
		{name: "exempt", partition: "dev", user: "alice", minute: 60,
			want: "note:exempt(exemption: on call)"},
		{name: "exempt note written once", partition: "dev", user: "alice", minute: 60,
			hist: map[string]string{"exempt": "skip@0"}},
		{name: "facts missing: notify only", partition: "", minute: 60,
			want: "note:facts(facts missing, no tier applies (at most notify): partition: partition: squeue down; exemption user: partition: squeue down) act:notify"},
		{name: "partition missing: notify only", partition: "?", minute: 60,
			want: "note:facts(facts missing, no tier applies (at most notify): partition: squeue down) act:notify"}, // the rule keeps only its notify steps
		{name: "reclaim not allowed in tier", partition: "prod", minute: 60, hist: map[string]string{"notify": "done@0", "warn": "done@0"},
			want: "note:reclaim(reclaim not allowed in tier prod)"},
		{name: "rate limited", partition: "dev", minute: 50, budget: Budget{PerCycle: 2, PerHour: 3, Hour: 3},
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30"},
			want: "defer:reclaim(" + RateLimited + ")"},
		{name: "already taken through another host", partition: "dev", minute: 50, jobTaken: []string{"reclaim"},
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30"},
			want: "note:reclaim(already taken for job 101 through another host's finding)"},
		{name: "no actuator", partition: "dev", minute: 50, unwired: []string{"slurm"},
			hist: map[string]string{"notify": "done@0", "warn": "done@10", "checkpoint": "done@30"},
			want: "note:reclaim(no actuator configured for slurm)"},
		{name: "failed step waits out its backoff", partition: "dev", minute: 3, hist: map[string]string{"notify": "fail@0"},
			want: "defer:notify(" + AwaitRetry + ")"},
		{name: "failed step retried after backoff", partition: "dev", minute: 5, hist: map[string]string{"notify": "fail@0"},
			want: "act:notify defer:warn(not due)"},
		{name: "backoff doubles", partition: "dev", minute: 14, hist: map[string]string{"notify": "fail@5x2"},
			want: "defer:notify(" + AwaitRetry + ")"},
		{name: "backoff is capped", partition: "dev", minute: 25, hist: map[string]string{"notify": "fail@5x3"},
			want: "act:notify defer:warn(not due)"},
		{name: "given up after max_attempts", partition: "dev", minute: 200, hist: map[string]string{"notify": "fail@100x4"},
			want: "note:gave_up(gave up notify after 4 failed attempts) defer:notify(" + GaveUp + ")"},
		{name: "dry-run steps have names of their own", partition: "shadow", minute: 0,
			want: "act:warn+dry_run defer:reclaim+dry_run(" + AwaitWarning + ")"},
		{name: "dry-run reclaim is not rate limited", partition: "shadow", minute: 30, budget: Budget{PerCycle: 0, PerHour: 0},
			hist: map[string]string{"warn+dry_run": "done@0"},
			want: "act:reclaim+dry_run"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := t0.Add(time.Duration(tc.minute) * time.Minute)
			user := tc.user
			if user == "" {
				user = "bob"
			}
			f := &finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityWarning, Job: "101", User: user, Team: "t",
				Hostname: "n1", Scheduler: schema.SchedulerSlurm, Start: t0.Add(-time.Hour), End: now, WastedGPUHours: 2}
			fa := facts.SlurmJob(tc.partition, "normal", "a", user, "j")
			switch tc.partition {
			case "": // every fact missing
				fa = &facts.Facts{Scheduler: schema.SchedulerSlurm}
				fa.MarkMissing("partition: squeue down")
			case "?": // the user is known, the partition is not
				fa = &facts.Facts{Scheduler: schema.SchedulerSlurm}
				fa.Set(schema.AttrUser, user)
				fa.MarkMissing("squeue down")
			}
			h := History{Steps: map[string]Past{}, JobTaken: map[string]bool{}}
			for k, v := range tc.hist {
				h.Steps[k] = past(v)
			}
			for _, k := range tc.jobTaken {
				h.JobTaken[k] = true
			}
			b := tc.budget
			if b == (Budget{}) {
				b = Budget{PerCycle: 2, PerHour: 3}
			}
			in := Input{Finding: f, Eval: pol.Evaluate(f, fa, now), Policy: pol, Episode: t0, History: h, Budget: b, Now: now,
				Wired: func(n string) bool {
					for _, u := range tc.unwired {
						if u == n {
							return false
						}
					}
					return true
				}}
			if got := summary(Plan(in)); got != tc.want {
				t.Errorf("plan = %q\nwant   %q", got, tc.want)
			}
		})
	}
}

// The plan announces the next step the job will meet, and never a reclaim
// the tier does not allow.
func TestPlanAnnouncesNextStep(t *testing.T) {
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		partition string
		want      string
	}{{"dev", "checkpoint at 10:20"}, {"prod", " at 00:00"}} {
		f := &finding.Finding{Pattern: schema.CPUOnly, Job: "7", User: "bob", Hostname: "n1", Scheduler: schema.SchedulerSlurm,
			Start: t0.Add(-time.Hour), End: t0.Add(10 * time.Minute), WastedGPUHours: 2}
		now := t0.Add(10 * time.Minute)
		fa := facts.SlurmJob(tc.partition, "normal", "a", "bob", "j")
		h := History{Steps: map[string]Past{"notify": past("done@0")}}
		steps := Plan(Input{Finding: f, Eval: pol.Evaluate(f, fa, now), Policy: pol, Episode: t0, History: h,
			Budget: Budget{PerCycle: 1, PerHour: 1}, Now: now, Wired: func(string) bool { return true }})
		if len(steps) == 0 || steps[0].Kind != Act || steps[0].Action != policy.StepWarn {
			t.Fatalf("%s: plan = %s", tc.partition, summary(steps))
		}
		if got := string(steps[0].NextStep) + " at " + steps[0].NextStepAt.Format("15:04"); got != tc.want {
			t.Errorf("%s: next = %q, want %q", tc.partition, got, tc.want)
		}
	}
}
