package jobview_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/jobview"
	"github.com/gpuwatch/gpuwatch/schema"
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

// tenantsFleet: GPU 0 of ten-01 is time-sliced among three servers at
// about 30 % of the device each and a notebook idle after its first 10
// minutes, the simulator publishing each holder's own use (shared: true)
// and naming them all, joined, in the device series' pod label, as
// gpuwatch's exporter does.
const tenantsFleet = `
name: jobview-tenants
fleet: [{hostname: ten-01, model: H100-SXM5-80GB, gpus: 1}]
workloads:
  - {id: serve-a, scheduler: kubernetes, namespace: hub, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-b, scheduler: kubernetes, namespace: hub, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: serve-c, scheduler: kubernetes, namespace: hub, container: main, user: ana, team: search, kind: service, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: training, params: {util: 30, memory_gib: 8}}
  - {id: jupyter-bo, scheduler: kubernetes, namespace: hub, container: notebook, user: bo, team: search, kind: interactive, node: ten-01, gpus: [0], shared: true, start: 0s, duration: 4h, behaviour: idle_notebook, params: {active: 10m, util: 30, memory_gib: 4}}
`

// TestJobViewShowsTenants (issue 57): the view of a tenant of a shared
// GPU finds the job in the device series' joined holder label, and lists
// the GPU's four holders with each one's share and what it made of it:
// the idle notebook's quarter wasted, each server's quarter used; the
// notebook's finding is on its own use. The text and the page say so.
func TestJobViewShowsTenants(t *testing.T) {
	t.Parallel()
	db := simloadtest.Formatted(t, simloadtest.Parse(t, "tenants.yaml", tenantsFleet),
		simload.Options{Seed: 5, Origin: origin, From: 30 * time.Second, To: 4*time.Hour + 10*time.Minute, Resolution: 30 * time.Second})
	ref, err := jobview.ParseRef("hub/jupyter-bo")
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobview.Build(context.Background(), jobview.Options{Querier: db, Now: origin.Add(6 * time.Hour), Lookback: 24 * time.Hour}, ref)
	if err != nil {
		t.Fatalf("the view of a shared GPU's tenant: %v", err)
	}
	if len(r.Tenants) != 4 {
		t.Fatalf("tenants %+v, want the GPU's four holders", r.Tenants)
	}
	for _, tn := range r.Tenants {
		if tn.Share < 0.22 || tn.Share > 0.28 {
			t.Errorf("%s: share %.2f, want a quarter", tn.Job, tn.Share)
		}
		switch {
		case tn.Job == "hub/jupyter-bo":
			if !tn.Self || tn.WastedGPUHours < 0.8*tn.GPUHours {
				t.Errorf("the idle notebook: %+v, want this job, its share wasted", tn)
			}
		case tn.Self || tn.UsedGPUHours < 0.9*tn.GPUHours || tn.WastedGPUHours > 0:
			t.Errorf("busy server: %+v, want its share used", tn)
		}
	}
	if len(r.Findings) != 1 || r.Findings[0].Pattern != schema.IdleSession {
		t.Errorf("findings %+v, want the notebook's idle session", r.Findings)
	}
	var text, page bytes.Buffer
	if err := jobview.Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := jobview.HTML(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Shared GPU: 4 holders", "hub/jupyter-bo (this job)", "hub/serve-c"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if !strings.Contains(page.String(), "Shared with other holders") || !strings.Contains(page.String(), "hub/serve-a") {
		t.Errorf("page lacks the tenants")
	}
}
