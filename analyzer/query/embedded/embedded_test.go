package embedded

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

func fam(name string, t dto.MetricType, v float64, labels ...string) *dto.MetricFamily {
	m := &dto.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(labels[i]), Value: proto.String(labels[i+1])})
	}
	switch t {
	case dto.MetricType_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	case dto.MetricType_UNTYPED:
		m.Untyped = &dto.Untyped{Value: proto.Float64(v)}
	default:
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	return &dto.MetricFamily{Name: proto.String(name), Type: t.Enum(), Metric: []*dto.Metric{m}}
}

func TestAppendAndQuery(t *testing.T) {
	db, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	app := db.Appender()
	for i := 0; i < 10; i++ {
		fams := []*dto.MetricFamily{
			fam(schema.GPUUtil.Name, dto.MetricType_GAUGE, float64(10*i), "UUID", "GPU-1", "hpc_job", ""),
			fam(schema.TotalEnergy.Name, dto.MetricType_COUNTER, float64(1000*i), "UUID", "GPU-1"),
			fam("untyped_thing", dto.MetricType_UNTYPED, 1),
		}
		if err := app.AppendFamilies(ctx, t0.Add(time.Duration(i)*30*time.Second), fams); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(270 * time.Second)
	v, err := db.Query(ctx, "avg_over_time("+schema.GPUUtil.Name+"[5m])", at)
	if err != nil {
		t.Fatal(err)
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 || vec[0].Value != 45 {
		t.Fatalf("avg = %v, want 45", v)
	}
	// An empty label is an absent label, as in Prometheus.
	if _, has := vec[0].Metric["hpc_job"]; has || vec[0].Metric["UUID"] != "GPU-1" {
		t.Errorf("labels %v", vec[0].Metric)
	}
	v, err = db.QueryRange(ctx, "rate("+schema.TotalEnergy.Name+"[2m])", query.Range{Start: t0.Add(2 * time.Minute), End: at, Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(model.Matrix)
	if !ok || len(m) != 1 || len(m[0].Values) != 3 || m[0].Values[0].Value < 33 || m[0].Values[0].Value > 34 {
		t.Fatalf("rate = %v, want 3 points of 33.3/s", v)
	}
	if v, err := db.Query(ctx, "scalar(untyped_thing)", at); err != nil || v.Type() != model.ValScalar {
		t.Errorf("scalar: %v %v", v, err)
	}
	if _, err := db.Query(ctx, "sum(", at); err == nil {
		t.Error("a bad expression gave no error")
	}
}

// The store keeps history older than the newest sample (a replayed week,
// a demo that starts in the past), within the retention.
func TestOutOfOrderWithinRetention(t *testing.T) {
	db, err := Open(t.TempDir(), Options{Retention: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	now := time.Date(2026, 8, 2, 0, 0, 0, 0, time.UTC)
	s := func(ts time.Time) []Sample {
		return []Sample{{Labels: map[string]string{"__name__": schema.GPUUtil.Name, "UUID": "GPU-1"}, T: ts, V: 1}}
	}
	if err := db.Appender().AppendSamples(ctx, s(now)); err != nil {
		t.Fatal(err)
	}
	if err := db.Appender().AppendSamples(ctx, s(now.Add(-24*time.Hour))); err != nil {
		t.Errorf("a day-old sample was refused: %v", err)
	}
}
