package jobview_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
)

// sharedFleet: GPU 0 of nb-01 is jupyter-ann's and time-sliced with three
// more notebooks in the series (the test's pods); GPU 1 is jupyter-sol's
// alone. All four hours long.
const sharedFleet = `
name: jobview-shared
fleet: [{hostname: nb-01, model: H100-SXM5-80GB, gpus: 2}]
workloads:
  - {id: jupyter-ann, scheduler: kubernetes, namespace: hub, container: notebook, user: ann, team: ds, kind: interactive, node: nb-01, gpus: [0], start: 0s, duration: 4h, behaviour: idle_notebook}
  - {id: jupyter-sol, scheduler: kubernetes, namespace: hub, container: notebook, user: sol, team: ds, kind: interactive, node: nb-01, gpus: [1], start: 0s, duration: 4h, behaviour: idle_notebook}
`

// TestSharedGPUHoursInJobView: the job view's allocated GPU-hours are the
// job's share of a time-sliced GPU, as the accounting splits it: each of
// four notebooks on one GPU holds a quarter of the hours of the notebook
// alone on a whole GPU, the four sum to the device's hours once (each
// used to be given the whole GPU's), and the end-of-job summary keeps it.
func TestSharedGPUHoursInJobView(t *testing.T) {
	t.Parallel()
	end := origin.Add(4 * time.Hour)
	var pods []simload.Pod
	for _, n := range []string{"jupyter-ben", "jupyter-cat", "jupyter-dan"} {
		pods = append(pods, simload.Pod{Name: n, Namespace: "hub", Container: "notebook", To: end})
	}
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "shared.yaml", sharedFleet),
		simload.Options{Seed: 5, Origin: origin, From: 30 * time.Second, To: 4*time.Hour + 10*time.Minute, Resolution: 30 * time.Second},
		simload.TimeSliced{Host: "nb-01", GPU: 0, Pods: pods}.Sink)
	ctx := context.Background()
	view := func(job string) *jobview.Report {
		ref, err := jobview.ParseRef(job)
		if err != nil {
			t.Fatal(err)
		}
		r, err := jobview.Build(ctx, jobview.Options{Querier: db, Now: origin.Add(6 * time.Hour), Lookback: 24 * time.Hour}, ref)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sole := view("hub/jupyter-sol")
	if want := float64(len(sole.GPUs)) * sole.DurationHours; math.Abs(sole.Totals.GPUHours-want) > 1e-9 {
		t.Errorf("alone on a GPU: %.3f GPU-h, want its span %.3f h", sole.Totals.GPUHours, want)
	}
	sum := 0.0
	for _, job := range []string{"hub/jupyter-ann", "hub/jupyter-ben", "hub/jupyter-cat", "hub/jupyter-dan"} {
		r := view(job)
		if q := r.Totals.GPUHours / sole.Totals.GPUHours; q < 0.22 || q > 0.28 {
			t.Errorf("%s: %.3f GPU-h allocated, %.2f of the whole GPU's %.3f, want a quarter", job, r.Totals.GPUHours, q, sole.Totals.GPUHours)
		}
		sum += r.Totals.GPUHours
		s, err := jobview.EncodeSummary(r, "", 1024)
		if err != nil {
			t.Fatal(err)
		}
		back, err := jobview.DecodeSummary(s)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(back.Totals.GPUHours-r.Totals.GPUHours) > 1e-3 {
			t.Errorf("%s: summary says %.3f GPU-h, the view %.3f", job, back.Totals.GPUHours, r.Totals.GPUHours)
		}
	}
	if math.Abs(sum-sole.Totals.GPUHours) > 0.03*sole.Totals.GPUHours {
		t.Errorf("the shared GPU's four notebooks hold %.3f GPU-h together, want the device's %.3f once", sum, sole.Totals.GPUHours)
	}
}
