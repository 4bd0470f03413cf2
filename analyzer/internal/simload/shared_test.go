package simload

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestTimeSlicedFansOutTheSharedGPU: the shared GPU's series come once per
// holder with the same value, each pod's labels and its replica, only
// while the extra pods hold it; other GPUs' series and the families
// handed in are left as they were.
func TestTimeSlicedFansOutTheSharedGPU(t *testing.T) {
	sc, err := sim.ParseScenario("ts.yaml", []byte(`
name: ts
fleet:
  - {hostname: n1, model: H100-SXM5-80GB, gpus: 2}
workloads:
  - {id: infer-a, scheduler: kubernetes, namespace: ns, container: main, user: ann, team: t, node: n1, gpus: [0], start: 0s, duration: 1h, behaviour: training}
  - {id: train-b, scheduler: kubernetes, namespace: ns, container: main, user: ben, team: t, node: n1, gpus: [1], start: 0s, duration: 1h, behaviour: training}
`))
	if err != nil {
		t.Fatal(err)
	}
	origin := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	ts := TimeSliced{Host: "n1", GPU: 0, Pods: []Pod{{Name: "infer-b", Namespace: ns2, Container: "main", From: origin.Add(time.Minute)}}}
	type seen struct {
		pods     map[string]float64
		replicas map[string]string
	}
	got := map[time.Duration]seen{}
	var before, after int
	_, err = Replay(context.Background(), sc, Options{Origin: origin, To: 2 * time.Minute, Resolution: time.Minute},
		func(at time.Time, fams []*dto.MetricFamily) error {
			before = labelCount(fams)
			err := ts.Sink(func(at time.Time, out []*dto.MetricFamily) error {
				s := seen{pods: map[string]float64{}, replicas: map[string]string{}}
				for _, mf := range out {
					if mf.GetName() != schema.FBUsed.Name {
						continue
					}
					for _, m := range mf.Metric {
						pod := label(m, schema.LabelPod)
						if label(m, schema.LabelGPU) == "0" {
							s.pods[label(m, schema.LabelNamespace)+"/"+pod] = m.GetGauge().GetValue()
							s.replicas[pod] = label(m, VGPULabel)
						} else if label(m, VGPULabel) != "" {
							t.Errorf("GPU %s labelled a replica", label(m, schema.LabelGPU))
						}
					}
				}
				got[at.Sub(origin)] = s
				return nil
			})(at, fams)
			after = labelCount(fams)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	if before != after {
		t.Errorf("the sink changed the families handed in: %d labels, then %d", before, after)
	}
	if s := got[0]; len(s.pods) != 1 || s.pods["ns/infer-a"] == 0 {
		t.Errorf("before the pods hold it: %v, want infer-a's series alone", s.pods)
	}
	s := got[time.Minute]
	if len(s.pods) != 2 || s.pods["ns/infer-a"] != s.pods[ns2+"/infer-b"] || s.pods["ns/infer-a"] == 0 {
		t.Errorf("while shared: %v, want infer-a's and infer-b's series, one value", s.pods)
	}
	if s.replicas["infer-a"] != "0" || s.replicas["infer-b"] != "1" {
		t.Errorf("replica labels %v", s.replicas)
	}
}

const ns2 = "other-ns"

func labelCount(fams []*dto.MetricFamily) int {
	n := 0
	for _, mf := range fams {
		for _, m := range mf.Metric {
			n += len(m.Label)
		}
	}
	return n
}
