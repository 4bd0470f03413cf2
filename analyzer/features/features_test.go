package features

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// fake fails the expressions that read one metric and answers the others
// with nothing.
type fake struct{ fail string }

func (f *fake) Query(context.Context, string, time.Time) (model.Value, error) {
	return nil, errors.New("instant queries are not used")
}

func (f *fake) QueryRange(_ context.Context, expr string, _ query.Range) (model.Value, error) {
	if strings.Contains(expr, f.fail) {
		return nil, errors.New("boom")
	}
	return model.Matrix{}, nil
}

var end = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func series(v float64, labels ...string) *model.SampleStream {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.SampleStream{Metric: m, Values: []model.SamplePair{{Timestamp: model.TimeFromUnixNano(end.UnixNano()), Value: model.SampleValue(v)}}}
}

func TestFetchJoinsSeries(t *testing.T) {
	mig := []string{"UUID", "GPU-p", "GPU_I_ID", "3", "GPU_I_PROFILE", "1g.10gb", "Hostname", "old-host", "pod", "nb", "namespace", "lab"}
	gpu := []string{"UUID", "GPU-a", "hostname", "h1", "modelName", "H100", "hpc_job", "77"}
	// Each expression's answer, keyed by its function and metric.
	answers := map[string]model.Matrix{
		"count_over_time|" + schema.FBUsed.Name:          {series(10, gpu...), series(10, mig...)},
		"max_over_time|" + schema.FBUsed.Name:            {series(40000, gpu...), series(2000, mig...)},
		"min_over_time|" + schema.FBFree.Name:            {series(41000, gpu...), series(7800, mig...)},
		"avg_over_time|" + schema.GPUUtil.Name:           {series(55, gpu...)},
		"max_over_time|" + schema.GPUUtil.Name:           {series(90, gpu...)},
		"avg_over_time|" + schema.ProfSMActive.Name:      {series(0.4, gpu...), series(0.2, mig...)},
		"max_over_time|" + schema.AllocationInfo.Name:    {series(1, append(gpu, "job_id", "77", "user", "ann", "team", "nlp", "kind", "Batch")...)},
		"count_over_time|" + schema.ProcessOrphaned.Name: {series(10, "UUID", "GPU-b", "hostname", "h1", "pid", "4242", "job_id", "66", "command", "python")},
		"avg_over_time|" + schema.PowerUsage.Name:        {series(350, gpu...)},
		"max_over_time|" + schema.PowerLimit.Name:        {series(700, gpu...)},
	}
	q := &answerer{answers: answers}
	steps, err := Fetch(context.Background(), q, end, 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if q.n.Load() != Queries {
		t.Errorf("%d queries, want %d", q.n.Load(), Queries)
	}
	s := steps[0]
	if !s.End.Equal(end) || !s.Start.Equal(end.Add(-5*time.Minute)) || s.ExpectedOf(DeviceID("h1", "GPU-a")) != 10 {
		t.Fatalf("step %v..%v expected %v", s.Start, s.End, s.Expected)
	}
	if len(s.GPUs) != 2 {
		t.Fatalf("GPUs: %+v", s.GPUs)
	}
	a, m := s.GPUs[0], s.GPUs[1]
	if a.Device != "GPU-a" || a.Host != "h1" || a.Job != "77" || !a.HasUtil || a.UtilAvg != 55 || a.FBTotalMiB != 81000 ||
		!a.HasSM || a.SMAvg != 0.4 || !a.HasPowerW || a.PowerW != 350 || !a.HasLimit || a.PowerLimitW != 700 || a.Model != "H100" {
		t.Errorf("GPU row %+v", a)
	}
	if m.Device != "GPU-p/3" || m.Host != "old-host" || m.Job != "lab/nb" || m.HasUtil || m.SMAvg != 0.2 || m.FBTotalMiB != 9800 {
		t.Errorf("MIG row %+v", m)
	}
	if in := s.Info[DeviceID("h1", "GPU-a")+"|77"]; in.User != "ann" || in.Team != "nlp" || in.Kind != "batch" {
		t.Errorf("info %+v", s.Info)
	}
	if len(s.Orphans) != 1 || s.Orphans[0].PID != "4242" || s.Orphans[0].Job != "66" {
		t.Errorf("orphans %+v", s.Orphans)
	}
}

// answerer looks up "fn|metric" of an expression of the form fn(metric[w]).
type answerer struct {
	answers map[string]model.Matrix
	n       atomic.Int64 // Fetch asks in parallel
}

func (a *answerer) Query(context.Context, string, time.Time) (model.Value, error) {
	return nil, errors.New("unused")
}

func (a *answerer) QueryRange(_ context.Context, expr string, _ query.Range) (model.Value, error) {
	a.n.Add(1)
	if strings.HasPrefix(expr, "label_replace(") {
		return model.Matrix{}, nil // the health queries: no health series here
	}
	fn := expr[:strings.Index(expr, "(")]
	metric := expr[strings.Index(expr, "(")+1 : strings.Index(expr, "[")]
	return a.answers[fn+"|"+metric], nil
}

func TestFetchErrors(t *testing.T) {
	f := &fake{fail: schema.PowerUsage.Name}
	if _, err := Fetch(context.Background(), f, end, 1, 5*time.Minute); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("error %v, want the query's", err)
	}
	if _, err := Fetch(context.Background(), f, end, 0, 5*time.Minute); err == nil {
		t.Error("zero steps accepted")
	}
}

// The window is a millisecond short of the step so that Prometheus 2.x
// (closed on the left) and 3.x (open) count the same samples.
func TestExprsWindow(t *testing.T) {
	for f, e := range Exprs(5 * time.Minute) {
		if feature(f) == fFaults {
			continue // the counters' levels: instant selectors, no window
		}
		if !strings.Contains(e, "[299999ms]") {
			t.Errorf("%s: want a 299999ms window", e)
		}
	}
	if len(Exprs(time.Minute)) != Queries {
		t.Errorf("%d expressions, Queries says %d", len(Exprs(time.Minute)), Queries)
	}
}

func TestHolderConventions(t *testing.T) {
	m := func(kv ...string) model.Metric {
		out := model.Metric{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		m         model.Metric
		host, job string
		pod, ns   string
	}{
		{"gpuwatch", m("UUID", "G", "hostname", "n1", "pod", "train-1", "namespace", "ml"), "n1", "ml/train-1", "train-1", "ml"},
		{"old Hostname", m("UUID", "G", "Hostname", "n2", "hpc_job", "42"), "n2", "42", "", ""},
		{"instance only", m("UUID", "G", "instance", "10.0.0.7:9400", "hpc_job", "42"), "10.0.0.7:9400", "42", "", ""},
		{"honor_labels false", m("UUID", "G", "hostname", "n1", "pod", "nvidia-dcgm-exporter-x7k2p", "namespace", "gpu-operator",
			"container", "nvidia-dcgm-exporter", "exported_pod", "train-1", "exported_namespace", "ml"), "n1", "ml/train-1", "train-1", "ml"},
		{"honor_labels false, free GPU", m("UUID", "G", "hostname", "n1", "pod", "nvidia-dcgm-exporter-x7k2p", "namespace", "gpu-operator",
			"container", "nvidia-dcgm-exporter"), "n1", "", "", ""},
		{"gpuwatch's own pod", m("UUID", "G", "hostname", "n1", "pod", "gpuwatch-exporter-abcde", "namespace", "monitoring"), "n1", "", "", ""},
		{"exporter known by its container", m("UUID", "G", "hostname", "n1", "pod", "metrics-7f9c", "container", "dcgm-exporter"), "n1", "", "", ""},
		{"a job named like a tool", m("UUID", "G", "hostname", "n1", "pod", "gpuwatcher-eval", "namespace", "ml"), "n1", "ml/gpuwatcher-eval", "gpuwatcher-eval", "ml"},
	} {
		g, ok := identify(tc.m, nil)
		if !ok || g.Host != tc.host || g.Job != tc.job || g.Pod != tc.pod || g.NS != tc.ns {
			t.Errorf("%s: got host %q job %q pod %q ns %q", tc.name, g.Host, g.Job, g.Pod, g.NS)
		}
	}
}

// TestExporterRestartIsOneHolder: an exporter replaced mid-step (honor_labels:
// false puts its new pod name on every series) leaves one holder whose
// samples add up, not two half-covered ones.
func TestExporterRestartIsOneHolder(t *testing.T) {
	old := []string{"UUID", "GPU-a", "hostname", "h1", "pod", "nvidia-dcgm-exporter-b2x4k", "exported_pod", "etl", "exported_namespace", "data"}
	cur := []string{"UUID", "GPU-a", "hostname", "h1", "pod", "nvidia-dcgm-exporter-q9z7m", "exported_pod", "etl", "exported_namespace", "data"}
	answers := map[string]model.Matrix{
		"count_over_time|" + schema.FBUsed.Name: {series(4, old...), series(6, cur...)},
		"max_over_time|" + schema.FBUsed.Name:   {series(100, old...), series(300, cur...)},
		"avg_over_time|" + schema.GPUUtil.Name:  {series(10, old...), series(30, cur...)},
		"max_over_time|" + schema.GPUUtil.Name:  {series(12, old...), series(40, cur...)},
	}
	steps, err := Fetch(context.Background(), &answerer{answers: answers}, end, 1, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps[0].GPUs) != 1 {
		t.Fatalf("rows %+v, want one holder", steps[0].GPUs)
	}
	g := steps[0].GPUs[0]
	if g.Job != "data/etl" || g.Samples != 10 || g.FBMaxMiB != 300 || g.UtilMax != 40 || g.UtilAvg != 20 {
		t.Errorf("merged row %+v", g)
	}
}
