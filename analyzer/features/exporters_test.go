package features

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/schema"
)

const tstep = 5 * time.Minute

// at builds a series with a value at each listed step of an n-step fetch
// ending at end.
func at(n int, vals map[int]float64, labels ...string) *model.SampleStream {
	ss := series(0, labels...)
	ss.Values = nil
	for i := 0; i < n; i++ {
		if v, ok := vals[i]; ok {
			ts := end.Add(-time.Duration(n-1-i) * tstep)
			ss.Values = append(ss.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(ts.UnixNano()), Value: model.SampleValue(v)})
		}
	}
	return ss
}

func all(n int, v float64) map[int]float64 {
	m := map[int]float64{}
	for i := 0; i < n; i++ {
		m[i] = v
	}
	return m
}

// fleet answers the framebuffer count and util of the given series (the
// same counts for both: every series here reads util too).
func fleet(ss ...*model.SampleStream) *answerer {
	return &answerer{answers: map[string]model.Matrix{
		"count_over_time|" + schema.FBUsed.Name: ss,
		"avg_over_time|" + schema.GPUUtil.Name:  ss,
	}}
}

func holders(steps []Step) map[string]string {
	out := map[string]string{}
	for _, s := range steps {
		for _, g := range s.GPUs {
			k := g.Host + "/" + g.Device
			if g.Job != "" && !strings.Contains(out[k], g.Job) {
				out[k] += g.Job + ";"
			}
		}
	}
	return out
}

// TestExportersByEvidence: the scrape target's own pod is told from the
// GPU's workload by what the data shows, under any release name.
func TestExportersByEvidence(t *testing.T) {
	const n = 3
	gpu := func(host, uuid string, kv ...string) []string {
		return append([]string{"UUID", uuid, "hostname", host}, kv...)
	}
	cases := []struct {
		name   string
		series []*model.SampleStream
		want   map[string]string // host/device -> holders seen
		taken  map[string]string // ns/pod -> a word of the reason
	}{
		{
			name: "NVIDIA Helm chart, honor_labels false",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "obs-dcgm-exporter-x7k2p", "namespace", "monitoring", "container", "exporter",
					"exported_pod", "train-1", "exported_namespace", "ml", "exported_container", "main")...),
				at(n, all(n, 20), gpu("n1", "G1", "pod", "obs-dcgm-exporter-x7k2p", "namespace", "monitoring", "container", "exporter")...),
			},
			want:  map[string]string{"n1/G0": "ml/train-1;"},
			taken: map[string]string{"monitoring/obs-dcgm-exporter-x7k2p": "honor_labels"},
		},
		{
			name: "any other name: the target on one node, its DaemonSet on another",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "gpu-telemetry-b4n9q", "namespace", "ops", "container", "metrics",
					"exported_pod", "train-1", "exported_namespace", "ml")...),
				at(n, all(n, 20), gpu("n2", "G5", "pod", "gpu-telemetry-h8d2m", "namespace", "ops", "container", "metrics")...),
			},
			want: map[string]string{"n1/G0": "ml/train-1;"},
			taken: map[string]string{"ops/gpu-telemetry-b4n9q": "honor_labels",
				"ops/gpu-telemetry-h8d2m": "DaemonSet"},
		},
		{
			name: "honor_labels true: the target's label fills a free GPU and moves",
			series: []*model.SampleStream{
				at(n, map[int]float64{0: 20, 2: 20}, gpu("n1", "G0", "pod", "telemetry-x7k2p", "namespace", "ops")...),
				at(n, map[int]float64{1: 20}, gpu("n1", "G0", "pod", "train-1", "namespace", "ml")...),
				at(n, all(n, 20), gpu("n1", "G1", "pod", "telemetry-x7k2p", "namespace", "ops")...),
			},
			want:  map[string]string{"n1/G0": "ml/train-1;"},
			taken: map[string]string{"ops/telemetry-x7k2p": "its own for its life"},
		},
		{
			name: "one DaemonSet on every GPU of every node",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "telemetry-x7k2p", "namespace", "ops")...),
				at(n, all(n, 20), gpu("n1", "G1", "pod", "telemetry-x7k2p", "namespace", "ops")...),
				at(n, all(n, 20), gpu("n2", "G2", "pod", "telemetry-q9z7m", "namespace", "ops")...),
			},
			want:  map[string]string{},
			taken: map[string]string{"ops/telemetry-x7k2p": "every GPU", "ops/telemetry-q9z7m": "every GPU"},
		},
		{
			name: "jobs stay jobs: multi-node pods, a tool-like name, a job on every GPU of one node",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "ddp-w2k4b", "namespace", "ml")...),
				at(n, all(n, 20), gpu("n2", "G1", "pod", "ddp-z5x7c", "namespace", "ml")...),
				at(n, all(n, 20), gpu("n3", "G2", "pod", "gpuwatcher-eval", "namespace", "ml")...),
				at(n, all(n, 20), gpu("n3", "G3")...),
			},
			want: map[string]string{"n1/G0": "ml/ddp-w2k4b;", "n2/G1": "ml/ddp-z5x7c;", "n3/G2": "ml/gpuwatcher-eval;"},
		},
		{
			name: "a pod taking over a GPU at its first step is a job",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "ddp-w2k4b", "namespace", "ml")...),
				at(n, map[int]float64{0: 12}, gpu("n1", "G1", "pod", "prev-q9z7m", "namespace", "ml")...),
				at(n, map[int]float64{0: 8, 1: 20, 2: 20}, gpu("n1", "G1", "pod", "ddp-w2k4b", "namespace", "ml")...),
				at(n, all(n, 20), gpu("n1", "G2")...),
			},
			want: map[string]string{"n1/G0": "ml/ddp-w2k4b;", "n1/G1": "ml/ddp-w2k4b;ml/prev-q9z7m;"},
		},
		{
			name: "GPU Operator and gpuwatch by name alone",
			series: []*model.SampleStream{
				at(n, all(n, 20), gpu("n1", "G0", "pod", "nvidia-dcgm-exporter-x7k2p", "namespace", "gpu-operator")...),
				at(n, all(n, 20), gpu("n1", "G1", "pod", "prod-gpuwatch-exporter-q9z7m", "namespace", "gpuwatch", "container", "exporter")...),
				at(n, all(n, 20), gpu("n1", "G2", "pod", "infer-0", "namespace", "ml")...),
			},
			want: map[string]string{"n1/G2": "ml/infer-0;"},
			taken: map[string]string{"gpu-operator/nvidia-dcgm-exporter-x7k2p": "named",
				"gpuwatch/prod-gpuwatch-exporter-q9z7m": "named"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := NewMemory()
			steps, err := FetchWith(context.Background(), fleet(c.series...), end, n, tstep, mem)
			if err != nil {
				t.Fatal(err)
			}
			got := holders(steps)
			if len(got) != len(c.want) {
				t.Errorf("holders %v, want %v", got, c.want)
			}
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s held by %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if len(mem.Exporters) != len(c.taken) {
				t.Errorf("exporters %v, want %v", mem.Exporters.List(), c.taken)
			}
			for k, word := range c.taken {
				x := mem.Exporters[k]
				if x == nil || !strings.Contains(x.Reason, word) {
					t.Errorf("%s: taken as %+v, want a reason saying %q", k, x, word)
				}
			}
		})
	}
}

// TestExportersRemembered: evidence seen in one fetch (the target beside an
// allocated GPU) holds in the next, which shows none.
func TestExportersRemembered(t *testing.T) {
	mem := NewMemory()
	first := fleet(
		at(1, all(1, 20), "UUID", "G0", "hostname", "n1", "pod", "telemetry-x7k2p", "namespace", "ops", "exported_pod", "train-1", "exported_namespace", "ml"),
		at(1, all(1, 20), "UUID", "G1", "hostname", "n1", "pod", "telemetry-x7k2p", "namespace", "ops"))
	if _, err := FetchWith(context.Background(), first, end, 1, tstep, mem); err != nil {
		t.Fatal(err)
	}
	later := fleet(
		at(1, all(1, 20), "UUID", "G0", "hostname", "n1", "pod", "telemetry-x7k2p", "namespace", "ops"),
		at(1, all(1, 20), "UUID", "G1", "hostname", "n1", "pod", "telemetry-x7k2p", "namespace", "ops"))
	steps, err := FetchWith(context.Background(), later, end, 1, tstep, mem)
	if err != nil {
		t.Fatal(err)
	}
	if h := holders(steps); len(h) != 0 {
		t.Errorf("free GPUs held by %v", h)
	}
	if steps, _ = Fetch(context.Background(), later, end, 1, tstep); len(holders(steps)) != 2 {
		t.Errorf("without the memory a fetch has no evidence; got %v", holders(steps))
	}
}

// TestCadencePerDevice: each device is judged by its own scrape interval,
// learnt from its samples: 5 samples a step at 60 s are as full as 20 at
// 15 s, and a device at half of its own count is unknown.
func TestCadencePerDevice(t *testing.T) {
	const n = 6
	fast := at(n, all(n, 20), "UUID", "F", "hostname", "n1", "hpc_job", "1")
	slowVals := all(n, 5)
	slowVals[3] = 2 // a gap inside the step: 2 of 5
	slow := at(n, slowVals, "UUID", "S", "hostname", "n2", "hpc_job", "2")
	mem := NewMemory()
	steps, err := FetchWith(context.Background(), fleet(fast, slow), end, n, tstep, mem)
	if err != nil {
		t.Fatal(err)
	}
	f, s := DeviceID("n1", "F"), DeviceID("n2", "S")
	for i, st := range steps {
		if !st.Known(f, 0.5) || st.Share(f, 20) != 1 {
			t.Errorf("step %d: the 15 s device not fully known", i)
		}
		if want := i != 3; st.Known(s, 0.5) != want {
			t.Errorf("step %d: the 60 s device known %v, want %v", i, st.Known(s, 0.5), want)
		}
	}
	if steps[0].Share(s, 5) != 1 || steps[0].Share(s, 2) != 0.4 {
		t.Errorf("60 s shares %v %v", steps[0].Share(s, 5), steps[0].Share(s, 2))
	}
	// The next fetch of one step in which the slow device is silent knows
	// its cadence: the silence is missing data.
	steps, err = FetchWith(context.Background(), fleet(at(1, all(1, 20), "UUID", "F", "hostname", "n1", "hpc_job", "1")), end, 1, tstep, mem)
	if err != nil {
		t.Fatal(err)
	}
	if steps[0].ExpectedOf(s) != 5 || steps[0].Known(s, 0.5) {
		t.Errorf("silent 60 s device: expected %v known %v", steps[0].ExpectedOf(s), steps[0].Known(s, 0.5))
	}
}
