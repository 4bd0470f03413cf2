package report

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestSharedGPUHoldersInTeamReport (issue 57): four notebooks time-sliced
// on one GPU for 10 hours, each booked as the engine books a holder (its
// quarter of the device's hour, GPUs: 1), one of them idle with its
// idle_session's quarter of the device wasted. The team's report lists
// the four holders, the idle one first, each at a quarter share with the
// hours of its share; a job alone on its GPU is no holder of a shared
// one. Text and HTML both show the list.
func TestSharedGPUHoldersInTeamReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := handStore(t)
	var us []store.Usage
	for _, job := range []string{"nb/ann", "nb/ben", "nb/cat", "nb/dan"} {
		active := 1.0
		if job == "nb/ann" {
			active = 0
		}
		for _, u := range hourly(w47, 10, "ts1", job, strings.TrimPrefix(job, "nb/"), "ml", h100, 1, active) {
			u.AllocatedGPUHours, u.ActiveGPUHours = u.AllocatedGPUHours/4, u.ActiveGPUHours/4
			us = append(us, u)
		}
	}
	if err := st.AddUsage(ctx, us); err != nil {
		t.Fatal(err)
	}
	idle := finding.Finding{Pattern: schema.IdleSession, Job: "nb/ann", User: "ann", Team: "ml", Hostname: "ts1", ModelName: h100,
		GPUs: []string{"g0"}, Start: w47, End: w47.Add(10 * time.Hour), WastedGPUHours: 2.5}
	if err := st.SaveFindings(ctx, w47.Add(10*time.Hour), []finding.Finding{idle}); err != nil {
		t.Fatal(err)
	}
	b := &Builder{Data: st, Config: handConfig(t), Now: func() time.Time { return w47.Add(8 * 24 * time.Hour) }}
	r, err := b.Build(ctx, WeekOf(w47, time.UTC), "ml")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Shared) != 4 || r.Shared[0].Job != "nb/ann" {
		t.Fatalf("shared %+v, want the four holders, the idle one first", r.Shared)
	}
	for _, s := range r.Shared {
		if !near(s.Share, 0.25) || !near(s.AllocatedGPUHours, 2.5) {
			t.Errorf("%s: share %.3f, %.3f GPU-h; want a quarter of the device's 10 hours", s.Job, s.Share, s.AllocatedGPUHours)
		}
		wantWaste, wantUsed := 0.0, 2.5
		if s.Job == "nb/ann" {
			wantWaste, wantUsed = 2.5, 0
		}
		if !near(s.WastedGPUHours, wantWaste) || !near(s.ActiveGPUHours, wantUsed) {
			t.Errorf("%s: used %.3f wasted %.3f, want %.1f and %.1f", s.Job, s.ActiveGPUHours, s.WastedGPUHours, wantUsed, wantWaste)
		}
	}
	rd, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	out, err := rd.Render(r, ImagesCID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Text, "SHARED GPUS") || !strings.Contains(out.Text, "nb/dan") || !strings.Contains(out.HTML, "Shared GPUs") {
		t.Errorf("the rendered report lacks the shared GPUs' holders:\n%s", out.Text)
	}
}
