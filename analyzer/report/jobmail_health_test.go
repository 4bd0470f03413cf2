package report

import (
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
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
