package simload

import (
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/schema"
)

// VGPULabel is the label dcgm-exporter adds with --kubernetes-virtual-gpus:
// the time-slicing replica a series' pod holds.
const VGPULabel = schema.LabelVGPU

// Pod is one holder of a shared GPU, from From until To (zero: from the
// start, to the end).
type Pod struct {
	Name, Namespace, Container string
	From, To                   time.Time
}

func (p *Pod) holds(t time.Time) bool {
	return (p.From.IsZero() || !t.Before(p.From)) && (p.To.IsZero() || t.Before(p.To))
}

// TimeSliced is a time-sliced GPU as dcgm-exporter publishes it with
// --kubernetes-virtual-gpus: every series of the device once per pod that
// holds a replica of it, the same values under each pod's labels and a
// vgpu label, the replica. The scenario's workload on the GPU is replica
// 0; Pods are the other holders, replicas 1 on. The simulator refuses two
// workloads on one GPU, so this is how a test gets a shared GPU's
// telemetry: the device's real series, fanned out as the exporter does.
type TimeSliced struct {
	// Host is the node (the scenario's hostname), GPU the device's index.
	Host string
	GPU  int
	Pods []Pod
}

// Sink wraps next so that it receives the shared GPU's series once per
// holder. Put it before a Format's sink: it reads gpuwatch's own labels.
func (s TimeSliced) Sink(next Sink) Sink {
	return func(t time.Time, fams []*dto.MetricFamily) error {
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, mf := range fams {
			out = append(out, s.fanOut(mf, t))
		}
		return next(t, out)
	}
}

// fanOut returns mf with the shared device's series labelled replica 0
// and copied once per pod that holds the GPU at t. The families are
// shared with other sinks: what changes is built anew.
func (s TimeSliced) fanOut(mf *dto.MetricFamily, t time.Time) *dto.MetricFamily {
	gpu := strconv.Itoa(s.GPU)
	var metrics []*dto.Metric
	hit := false
	for _, m := range mf.Metric {
		if label(m, schema.LabelHostname) != s.Host || label(m, schema.LabelGPU) != gpu {
			metrics = append(metrics, m)
			continue
		}
		hit = true
		metrics = append(metrics, replica(m, 0, nil))
		for i := range s.Pods {
			if s.Pods[i].holds(t) {
				metrics = append(metrics, replica(m, i+1, &s.Pods[i]))
			}
		}
	}
	if !hit {
		return mf
	}
	return &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Unit: mf.Unit, Metric: metrics}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// replica is m as replica n's series: held by p (nil: m's own holder).
func replica(m *dto.Metric, n int, p *Pod) *dto.Metric {
	c := &dto.Metric{Gauge: m.Gauge, Counter: m.Counter, Summary: m.Summary, Untyped: m.Untyped,
		Histogram: m.Histogram, TimestampMs: m.TimestampMs, Label: make([]*dto.LabelPair, 0, len(m.Label)+4)}
	set := map[string]string{VGPULabel: strconv.Itoa(n)}
	if p != nil {
		set[schema.LabelPod], set[schema.LabelNamespace], set[schema.LabelContainer] = p.Name, p.Namespace, p.Container
	}
	for _, l := range m.Label {
		if _, ok := set[l.GetName()]; !ok {
			c.Label = append(c.Label, l)
		}
	}
	for k, v := range set {
		if v != "" {
			c.Label = append(c.Label, &dto.LabelPair{Name: proto.String(k), Value: proto.String(v)})
		}
	}
	sort.Slice(c.Label, func(i, j int) bool { return c.Label[i].GetName() < c.Label[j].GetName() })
	return c
}
