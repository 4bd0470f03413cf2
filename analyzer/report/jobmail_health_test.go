package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestJobMailEndedByFault: a job that ended of a GPU fault is told so in
// the subject, the text and the HTML, with the advice to resubmit, and its
// degraded GPU-hours are shown apart from the waste.
func TestJobMailEndedByFault(t *testing.T) {
	rd, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	f := finding.Finding{Pattern: schema.GPUFault, Job: "3003", Hostname: "xf-01", GPU: "GPU-1",
		Evidence: map[string]float64{"xid": 79, "ended_by_fault": 1}}
	e := &EndedJob{Job: "3003", Hostname: "xf-01", User: "cat", GPUs: 4, Model: "H100", Start: time.Unix(0, 0), End: time.Unix(3600, 0),
		AllocatedGPUHours: 4, ActiveGPUHours: 4, EndedByFault: Advise(&f), DegradedGPUHours: 1.5,
		Findings: []AdviceRow{{Job: "3003", Pattern: schema.GPUFault, Advice: Advise(&f)}}}
	r, err := rd.RenderJob(e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Subject, "ended by a GPU fault") {
		t.Errorf("subject %q", r.Subject)
	}
	for _, body := range []string{r.Text, r.HTML} {
		for _, want := range []string{"GPU-1", "XID 79", "fallen off the bus", "resubmit", "1.5"} {
			if !strings.Contains(body, want) {
				t.Errorf("mail lacks %q:\n%s", want, body)
			}
		}
	}
}

// TestFleetHealthRanking: nodes are ranked by throttled GPU-hours, then
// faults, each beside its model's figure over the fleet; healthy nodes
// are not listed, and none of it is waste.
func TestFleetHealthRanking(t *testing.T) {
	t.Parallel()
	p := WeekOf(time.Date(2026, 11, 18, 12, 0, 0, 0, time.UTC), time.UTC)
	at := p.Start.Add(24 * time.Hour)
	var usage []store.Usage
	for _, h := range []string{"a1", "a2", "h1"} {
		model := "NVIDIA A100-SXM4-80GB"
		if h == "h1" {
			model = "NVIDIA H100 80GB HBM3"
		}
		usage = append(usage, store.Usage{Start: at, End: at.Add(time.Hour), Hostname: h, Job: "j-" + h, Model: model,
			GPUs: 4, AllocatedGPUHours: 100, ActiveGPUHours: 100})
	}
	fs := []finding.Finding{
		{Pattern: schema.Straggler, Hostname: "a1", Job: "j-a1", ModelName: "NVIDIA A100-SXM4-80GB", Start: at, End: at.Add(time.Hour),
			Evidence: map[string]float64{"throttled_gpu_hours": 10, schema.EvidenceDegraded: 4}},
		{Pattern: schema.GPUFault, Hostname: "h1", Job: "j-h1", ModelName: "NVIDIA H100 80GB HBM3", Start: at, End: at.Add(time.Hour),
			Evidence: map[string]float64{"xid": 79, "ended_by_fault": 1}},
		{Pattern: schema.CPUOnly, Hostname: "a2", Job: "j-a2", Start: at, End: at.Add(time.Hour), WastedGPUHours: 50},
	}
	rows := fleetHealth(usage, fs, p, 10)
	if len(rows) != 2 || rows[0].Hostname != "a1" || rows[1].Hostname != "h1" {
		t.Fatalf("rows %+v, want a1 (throttled) then h1 (fault)", rows)
	}
	a := rows[0]
	if a.ThrottledGPUHours != 10 || a.ThrottledShare != 0.1 || a.ModelThrottledShare != 0.05 || a.Stragglers != 1 || a.DegradedGPUHours != 4 {
		t.Errorf("a1: %+v (its 10 of 100 throttled, the A100s' 10 of 200)", a)
	}
	if h := rows[1]; h.Faults != 1 || h.JobsEndedByGPUFault != 1 || h.FaultsPer1k != 10 || h.ModelFaultsPer1k != 10 {
		t.Errorf("h1: %+v", h)
	}
	rd, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{Period: p, TimeZone: "UTC", FleetHealth: rows}
	for _, d := range p.Days() {
		r.Daily = append(r.Daily, DayRow{Date: d.Label, AllocatedGPUHours: 100, ActiveGPUHours: 100})
	}
	out, err := rd.Render(r, ImagesDataURI)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{out.Text, out.HTML} {
		if !strings.Contains(body, "a1") || !strings.Contains(strings.ToLower(body), "fleet health") {
			t.Errorf("report lacks the fleet-health section:\n%s", body)
		}
	}
}
