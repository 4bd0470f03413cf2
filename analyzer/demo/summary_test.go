package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/action"
	"github.com/gpuwatch/gpuwatch/analyzer/audit"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

func fnd(job, host, team string, p schema.Pattern, gpus int, wasted float64, end time.Duration) finding.Finding {
	f := finding.Finding{Job: job, Hostname: host, Team: team, User: "u-" + job, Pattern: p, WastedGPUHours: wasted,
		Start: origin, End: origin.Add(end)}
	for i := 0; i < gpus; i++ {
		f.GPUs = append(f.GPUs, fmt.Sprintf("GPU-%s-%d", job, i))
	}
	return f
}

func ev(job, host, pattern, step string, state audit.State, at time.Duration) audit.Event {
	return audit.Event{Job: job, Hostname: host, Pattern: pattern, Step: step, State: state, DryRun: true, At: origin.Add(at)}
}

func TestReclaims(t *testing.T) {
	res := &Result{
		Findings: []finding.Finding{
			fnd("1", "a", "t1", schema.Stuck, 4, 20, 10*time.Hour),
			fnd("2", "a", "t1", schema.CPUOnly, 1, 5, 3*time.Hour),
			fnd("3", "b", "t2", schema.IdleSession, 1, 2, time.Hour),
		},
		Audit: []audit.Event{
			ev("1", "a", "stuck", "warn", audit.Done, 0),
			ev("1", "a", "stuck", "reclaim", audit.Intended, 2*time.Hour),
			ev("1", "a", "stuck", "reclaim", audit.DryRun, 2*time.Hour),
			ev("2", "a", "cpu_only", "reclaim", audit.DryRun, time.Hour),
			ev("2", "a", "cpu_only", "reclaim", audit.DryRun, time.Hour), // a repeat must not count twice
			// Reclaimed after the finding's end: nothing left to free.
			ev("3", "b", "idle_session", "reclaim", audit.DryRun, 2*time.Hour),
			// A real reclaim is not a dry-run one.
			{Job: "4", Hostname: "b", Pattern: "stuck", Step: "reclaim", State: audit.Done, At: origin},
		},
	}
	got := res.Reclaims()
	want := []Reclaim{
		{Job: "1", Hostname: "a", Pattern: "stuck", At: origin.Add(2 * time.Hour), GPUs: 4, FreedGPUHours: 32},
		{Job: "2", Hostname: "a", Pattern: "cpu_only", At: origin.Add(time.Hour), GPUs: 1, FreedGPUHours: 2},
		{Job: "3", Hostname: "b", Pattern: "idle_session", At: origin.Add(2 * time.Hour), GPUs: 1, FreedGPUHours: 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Reclaims() =\n%v\nwant\n%v", got, want)
	}
}

// TestWriteSummary prints the fleet report of a hand-made day read back
// from a store: the summary's figures are the report's.
func TestWriteSummary(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	end := origin.Add(24 * time.Hour)
	res := &Result{Scenario: "s", Nodes: 1, GPUs: 8, Origin: origin, End: end, Step: 30 * time.Second}
	// Seven jobs of one GPU for a day, half active, so that only the five
	// worst are listed; job 7 is stuck and also over its limit, which is
	// not waste.
	var fs []finding.Finding
	for i, w := range []float64{3, 9, 1, 7, 2, 5} {
		fs = append(fs, fnd(fmt.Sprint(i+1), "h", "team-long-name", schema.LowUtilization, 1, w, time.Hour))
	}
	long := fnd("7", "h", "x", schema.Overlong, 1, 0, time.Hour)
	long.Evidence = map[string]float64{"over_limit_gpu_hours": 6}
	fs = append(fs, fnd("7", "h", "x", schema.Stuck, 1, 6, time.Hour), long)
	var us []store.Usage
	for _, f := range fs[:7] {
		for h := 0; h < 24; h++ {
			s := origin.Add(time.Duration(h) * time.Hour)
			us = append(us, store.Usage{Start: s, End: s.Add(time.Hour), Hostname: f.Hostname, Job: f.Job, User: f.User, Team: f.Team,
				GPUs: 1, AllocatedGPUHours: 1, ActiveGPUHours: 0.5})
		}
	}
	if err := st.AddUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveFindings(ctx, origin.Add(time.Hour), fs); err != nil {
		t.Fatal(err)
	}
	cfg := &report.Config{}
	cfg.Defaults()
	if res.Fleet, err = report.NewBuilder(st, cfg).Build(ctx, report.Period{Kind: report.Week, Start: origin, End: end, Label: "day"}, ""); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSummary(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"168.0 allocated, 84.0 used, 33.0 wasted (19.6% of allocated), 6.0 over the limit", "low_utilization", "27.0"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	var worst []string
	for i, l := range lines {
		if strings.HasPrefix(l, "WORST JOBS") {
			col := strings.Index(l, "GPU-HOURS")
			for _, r := range lines[i+1:] {
				if strings.TrimSpace(r) == "" {
					break
				}
				worst = append(worst, strings.Fields(r)[0])
				if r[col-2:col] != "  " || r[col] == ' ' {
					t.Errorf("column not aligned under GPU-HOURS: %q", r)
				}
			}
		}
	}
	if got, want := strings.Join(worst, " "), "2 4 7 6 1"; got != want {
		t.Errorf("worst jobs %q, want %q:\n%s", got, want, out)
	}
	if !strings.Contains(out, "reclaimed 0 job(s)") || strings.Contains(out, "WOULD RECLAIM") {
		t.Errorf("summary without reclaims:\n%s", out)
	}
}

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		terminal   bool
		wantLines  int
		wantReturn bool
	}{
		{terminal: false, wantLines: 4, wantReturn: false}, // 25, 50, 75 %, done
		{terminal: true, wantLines: 1, wantReturn: true},
	} {
		var b bytes.Buffer
		p := newProgress(&b, tc.terminal, 1000)
		for n := 1; n <= 1000; n++ {
			p.set(n, time.Duration(n)*time.Minute)
		}
		p.done()
		if got := strings.Count(b.String(), "\n"); got != tc.wantLines {
			t.Errorf("terminal=%v: %d lines, want %d:\n%q", tc.terminal, got, tc.wantLines, b.String())
		}
		if got := strings.Contains(b.String(), "\r"); got != tc.wantReturn {
			t.Errorf("terminal=%v: carriage returns %v, want %v", tc.terminal, got, tc.wantReturn)
		}
		if tc.terminal && !strings.Contains(b.String(), "100%") {
			t.Errorf("terminal bar never reached 100%%: %q", b.String())
		}
	}
	newProgress(nil, true, 10).set(5, time.Minute) // no writer: no panic
}

// TestActuatorsOnlyRecord: notifications are recorded and counted; a
// disruptive step is refused, never reported as done.
func TestActuatorsOnlyRecord(t *testing.T) {
	rec := &recorder{}
	acts := rec.actuators()
	for _, tc := range []struct {
		actuator, step string
		wantErr        bool
	}{
		{"webhook", "notify", false},
		{"email", "warn", false},
		{"slurm", "reclaim", true},
		{"kubernetes", "checkpoint", true},
		{"process", "reclaim", true},
	} {
		req := &action.Request{Step: tc.step, Finding: fnd("9", "h", "t", schema.Stuck, 1, 1, time.Hour), DryRun: true}
		detail, err := acts[tc.actuator].Act(context.Background(), req)
		if (err != nil) != tc.wantErr {
			t.Errorf("%s %s: err = %v, want error %v", tc.actuator, tc.step, err, tc.wantErr)
		}
		if tc.wantErr && !errors.Is(err, action.ErrUnsupported) {
			t.Errorf("%s %s: err = %v, want ErrUnsupported (skipped)", tc.actuator, tc.step, err)
		}
		if !tc.wantErr && !strings.Contains(detail, "not delivered") {
			t.Errorf("%s %s: detail %q does not say it was only recorded", tc.actuator, tc.step, detail)
		}
	}
	if rec.count() != 2 {
		t.Errorf("recorded %d notifications, want 2", rec.count())
	}
}

// TestSummaryReclaimsCountWhatItLists: the dry-run line counts the jobs the
// list below shows, and the list says when it shows only the largest (the
// demo said "reclaimed 7 job(s)" over five rows); a job reclaimed for two
// patterns is one job, its GPU-hours freed once.
func TestSummaryReclaimsCountWhatItLists(t *testing.T) {
	res := &Result{Scenario: "s", Nodes: 1, GPUs: 8, Origin: origin, End: origin.Add(24 * time.Hour), Step: 30 * time.Second,
		Fleet: &report.Report{}}
	for i := 1; i <= 7; i++ {
		job := fmt.Sprint(i)
		res.Findings = append(res.Findings, fnd(job, "h", "t", schema.Stuck, 1, 1, time.Duration(10+i)*time.Hour))
		res.Audit = append(res.Audit, ev(job, "h", "stuck", "reclaim", audit.DryRun, time.Hour))
	}
	// Job 7 again, for another pattern.
	res.Findings = append(res.Findings, fnd("7", "h", "t", schema.CPUOnly, 1, 1, 17*time.Hour))
	res.Audit = append(res.Audit, ev("7", "h", "cpu_only", "reclaim", audit.DryRun, 2*time.Hour))
	var b bytes.Buffer
	if err := WriteSummary(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Jobs 1..7 freed 10+i GPU-hours each: 10+...+16 = 91.
	for _, want := range []string{"reclaimed 7 job(s) (7 GPUs), freeing 91.0 GPU-hours", "WOULD RECLAIM (5 shown of 7, most GPU-hours freed first)"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "  ") && strings.Contains(l, " on h") {
			rows++
		}
	}
	if rows != 5 {
		t.Errorf("%d reclaim rows, want 5:\n%s", rows, out)
	}
}
