package store

import (
	"context"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Job 60 and job 601 on the same host stay apart (finding keys share a
// prefix), and a job with usage after the window has not ended.
func TestJobReads(t *testing.T) {
	t.Parallel()
	backends(t, testJobReads)
}

func testJobReads(t *testing.T, open func(t *testing.T) *Store) {
	ctx := context.Background()
	st := open(t)
	t0 := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	hour := func(h int, job string, gpus int, active float64) Usage {
		s := t0.Add(time.Duration(h) * time.Hour)
		return Usage{Start: s, End: s.Add(time.Hour), Hostname: "n", Job: job, User: "u" + job, Team: "t", Model: "H100",
			GPUs: gpus, AllocatedGPUHours: float64(gpus), ActiveGPUHours: active}
	}
	if err := st.AddUsage(ctx, []Usage{hour(0, "60", 1, 1), hour(1, "60", 1, 0.5), hour(0, "601", 2, 0), hour(0, "7", 1, 0), hour(5, "7", 1, 0)}); err != nil {
		t.Fatal(err)
	}
	f := func(job string, p schema.Pattern, w float64) finding.Finding {
		return finding.Finding{Hostname: "n", Job: job, Pattern: p, WastedGPUHours: w, Start: t0, End: t0.Add(time.Hour)}
	}
	if err := st.SaveFindings(ctx, t0.Add(time.Hour), []finding.Finding{f("60", schema.LowUtilization, 0.2), f("601", schema.CPUOnly, 1)}); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveFindings(ctx, t0.Add(2*time.Hour), []finding.Finding{f("60", schema.LowUtilization, 0.5)}); err != nil {
		t.Fatal(err)
	}
	ended, err := st.JobsEndedBetween(ctx, t0, t0, t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ended) != 2 || ended[0].Job != "601" || ended[1].Job != "60" || !ended[1].LastEnd.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("ended %+v", ended)
	}
	u, ok, err := st.JobUsage(ctx, "n", "60")
	if err != nil || !ok || u.AllocatedGPUHours != 2 || u.ActiveGPUHours != 1.5 || u.User != "u60" || !u.Start.Equal(t0) || !u.End.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("usage %+v %v %v", u, ok, err)
	}
	if _, ok, err := st.JobUsage(ctx, "n", "6"); ok || err != nil {
		t.Fatalf("job 6: %v %v", ok, err)
	}
	fs, err := st.JobFindings(ctx, "n", "60")
	if err != nil || len(fs) != 1 || fs[0].WastedGPUHours != 0.5 {
		t.Fatalf("findings of 60: %+v %v", fs, err)
	}
}
