package features_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/simload/simloadtest"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
)

// TestHolderReadsCostTwoQueries: a holder's own use is read with two
// queries per fetch (issue 57 allows no more), its SM share and its memory,
// on top of the sixteen of the device features.
func TestHolderReadsCostTwoQueries(t *testing.T) {
	holder := 0
	for _, e := range features.Exprs(5 * time.Minute) {
		if strings.Contains(e, "gpuwatch_holder_") {
			holder++
		}
	}
	if holder != 2 || features.Queries != 16+holder {
		t.Errorf("%d of %d queries read gpuwatch_holder_*, want 2 of 18", holder, features.Queries)
	}
}

// sharedTimeslice replays the simulator's built-in time-sliced scenario
// (GPU 0 of share-01 held by three servers at ~25 % each and an idle
// notebook; GPU 1 by one training job) for its first two hours, in format
// f, with wraps after it.
func sharedTimeslice(t *testing.T, f simload.Format, wraps ...simloadtest.Wrap) (query.Querier, time.Time) {
	t.Helper()
	sc, err := sim.Builtin("shared-timeslice")
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	db := simloadtest.Formatted(t, sc, simload.Options{Seed: 3, Origin: origin, From: 30 * time.Second, To: 2 * time.Hour,
		Resolution: 30 * time.Second}, append([]simloadtest.Wrap{f.Sink}, wraps...)...)
	return db, origin
}

// TestSharedDeviceSplitByHolder: gpuwatch's exporter names a time-sliced
// GPU's four holders joined in one pod label and publishes each one's own
// use; the features give each holder a row of its own, with its own SM
// share and memory, a quarter of the device's samples, and the device's
// four holders. The unshared GPU keeps its one row.
func TestSharedDeviceSplitByHolder(t *testing.T) {
	q, origin := sharedTimeslice(t, simload.Format{})
	c := &query.Counting{Q: q}
	steps, err := features.Fetch(context.Background(), c, origin.Add(time.Hour), 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if c.Count() != features.Queries {
		t.Errorf("%d queries, want %d", c.Count(), features.Queries)
	}
	s := steps[0]
	rows := map[string]features.GPU{}
	for _, g := range s.GPUs {
		rows[g.Job] = g
	}
	if len(rows) != 5 {
		t.Fatalf("rows %v, want the four holders of GPU 0 and job 7001", jobsOf(s.GPUs))
	}
	dev := ""
	for _, job := range []string{"infer/serve-a", "infer/serve-b", "infer/serve-c", "infer/nb-idle"} {
		g, ok := rows[job]
		if !ok {
			t.Fatalf("no row of %s: %v", job, jobsOf(s.GPUs))
		}
		dev = features.DeviceID(g.Host, g.Device)
		if g.Holders != 4 || !g.HasOwn || !g.Own.HasSM || !g.Own.HasMemory || g.Pod != strings.TrimPrefix(job, "infer/") || g.NS != "infer" {
			t.Errorf("%s: %+v, want its own use of one of four holders", job, g)
		}
		if share := s.Share(dev, g.Samples); math.Abs(share-0.25) > 0.01 {
			t.Errorf("%s: share %.3f of the device, want a quarter", job, share)
		}
		want, mem := 0.25, 8192.0
		if job == "infer/nb-idle" {
			want, mem = 0, 4096
		}
		if math.Abs(g.Own.SM-want) > 0.08 || math.Abs(g.Own.MemoryMiB-mem) > 0.1*mem {
			t.Errorf("%s: own SM %.3f, memory %.0f MiB; want ~%.2f and ~%.0f", job, g.Own.SM, g.Own.MemoryMiB, want, mem)
		}
		// The device's counters stay the device's: the sum of all four.
		if g.UtilAvg < 60 {
			t.Errorf("%s: device util %.1f, want the three servers' sum", job, g.UtilAvg)
		}
	}
	if got, want := s.DeviceSamples[dev], s.ExpectedOf(dev); math.Abs(got-want) > 1 {
		t.Errorf("the shared device's samples over its holders %.1f, want one device's %.1f", got, want)
	}
	if g := rows["7001"]; g.Holders != 1 || g.HasOwn {
		t.Errorf("unshared GPU: %+v, want one holder and no own-use row", g)
	}
}

// TestSharedReplicasAreDeviceTotals: dcgm-exporter's per-vgpu copies of a
// time-sliced GPU (KUBERNETES_VIRTUAL_GPUS) carry the device's totals under
// each pod: the features count the device's holders and give none of them
// own use, so no detector reads a copy as the tenant's.
func TestSharedReplicasAreDeviceTotals(t *testing.T) {
	sc := simloadtest.Parse(t, "vgpu.yaml", `
name: vgpu
fleet:
  - {hostname: ts-01, model: L40S, gpus: 1}
workloads:
  - {id: serve-a, scheduler: kubernetes, namespace: infer, container: main, user: ana, team: search, node: ts-01, gpus: [0], start: 0s, duration: 3h, behaviour: training}
`)
	origin := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	vgpu := simload.TimeSliced{Host: "ts-01", GPU: 0, Pods: []simload.Pod{
		{Name: "serve-b", Namespace: "infer"}, {Name: "serve-c", Namespace: "infer"}, {Name: "serve-d", Namespace: "infer"}}}
	db := simloadtest.Formatted(t, sc, simload.Options{Seed: 3, Origin: origin, From: 30 * time.Second, To: 2 * time.Hour,
		Resolution: 30 * time.Second}, simload.Format{Stock: true}.Sink, vgpu.Sink)
	steps, err := features.Fetch(context.Background(), db, origin.Add(time.Hour), 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s := steps[0]
	if len(s.GPUs) != 4 {
		t.Fatalf("rows %v, want the four replicas' pods", jobsOf(s.GPUs))
	}
	for _, g := range s.GPUs {
		if g.HasOwn || g.Holders != 4 || g.UtilAvg < 80 {
			t.Errorf("%s: own use %v, %d holders, util %.1f; want none, 4, the device's", g.Job, g.HasOwn, g.Holders, g.UtilAvg)
		}
		if share := s.Share(features.DeviceID(g.Host, g.Device), g.Samples); math.Abs(share-0.25) > 0.01 {
			t.Errorf("%s: share %.3f, want a quarter", g.Job, share)
		}
	}
}

// TestJoinedHoldersWithoutOwnUse: series thinned to dcgm-exporter's
// families (no gpuwatch_holder_*) still name a time-sliced GPU's holders
// in gpuwatch's joined pod label: each is a holder of its own, of four,
// without own use.
func TestJoinedHoldersWithoutOwnUse(t *testing.T) {
	q, origin := sharedTimeslice(t, simload.Format{Stock: true})
	steps, err := features.Fetch(context.Background(), q, origin.Add(time.Hour), 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range steps[0].GPUs {
		if g.HasOwn {
			t.Errorf("%s has own use without gpuwatch_holder_*", g.Job)
		}
		if g.Job == "7001" {
			continue
		}
		n++
		if g.Holders != 4 || g.NS != "infer" || strings.Contains(g.Pod, ",") {
			t.Errorf("%s: %d holders (pod %q), want one holder of four", g.Job, g.Holders, g.Pod)
		}
	}
	if n != 4 {
		t.Errorf("rows %v, want GPU 0's four holders", jobsOf(steps[0].GPUs))
	}
}

func jobsOf(gs []features.GPU) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Job)
	}
	return out
}
