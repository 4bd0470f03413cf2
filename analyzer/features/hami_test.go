package features_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/hamitest"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
)

// TestHAMiShareWaste: reading HAMi's recorded metrics gives each
// container's share waste: what it reserved (cores, memory) against what
// it used over the last hour, and the quota that would hold its use. The
// LLM server used 12.5 % of its 50 % of the cores (peak 14 %) and 6 of
// its 20 GiB; the embedder used its share; the notebook never ran a
// kernel. The same figures whatever honor_labels and under HAMi's older
// names.
func TestHAMiShareWaste(t *testing.T) {
	at := hamitest.At
	for _, c := range []struct {
		name                string
		honorLabels, legacy bool
	}{
		{"honor_labels true", true, false},
		{"honor_labels false", false, false},
		{"legacy names", true, true},
		{"legacy names, honor_labels false", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := &query.Counting{Q: hamitest.Load(t, c.honorLabels, c.legacy)}
			ws, err := features.ReadHAMi(context.Background(), q, at, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if q.Count() != 1 {
				t.Errorf("%d queries, want 1", q.Count())
			}
			checkHAMiWaste(t, ws)
		})
	}
}

func checkHAMiWaste(t *testing.T, ws []features.ShareWaste) {
	t.Helper()
	by := map[string]features.ShareWaste{}
	for _, w := range ws {
		if w.Host != "gpu-07" || w.UUID != "GPU-6a3f1c2e-8d4b-4f7a-9e21-3b5c7d9f0a11" {
			t.Errorf("%s/%s on %s %s, want gpu-07's GPU 0", w.Namespace, w.Pod, w.Host, w.UUID)
		}
		by[w.Namespace+"/"+w.Pod+"/"+w.Container] = w
	}
	if len(by) != 3 {
		t.Fatalf("shares %v, want the three containers'", ws)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	// The window (left-open, as Prometheus 3 reads it) holds the four
	// scrapes after the first.
	llm := by["infer/llm-0/server"]
	if !llm.HasCores || !near(llm.Hours, 1) || !near(llm.ReservedCores, 50) || !near(llm.UsedCoresMean, 12.5) ||
		!near(llm.UsedCoresPeak, 14) || !near(llm.ReservedMiB, 20480) || !near(llm.UsedPeakMiB, 6144) {
		t.Errorf("LLM server %+v", llm)
	}
	// 37.5 % of the device unused for an hour; 14 % and 6 GiB with a
	// quarter more room, rounded up: 20 % and 8 GiB.
	if !near(llm.WastedGPUHours, 0.375) || !near(llm.FitCores, 20) || !near(llm.FitMiB, 8192) {
		t.Errorf("LLM server waste %.4f GPU-h, fit %v%% and %v MiB; want 0.375, 20 and 8192", llm.WastedGPUHours, llm.FitCores, llm.FitMiB)
	}
	if a := llm.Advice; !strings.Contains(a, "nvidia.com/gpucores: 20") || !strings.Contains(a, "nvidia.com/gpumem: 8192") {
		t.Errorf("LLM server advice %q", a)
	}
	emb := by["infer/embed-0/embed"]
	if !emb.HasCores || !near(emb.WastedGPUHours, 0.0075) || emb.FitCores != emb.ReservedCores || emb.FitMiB != emb.ReservedMiB {
		t.Errorf("embedder %+v, want its share fitting its use", emb)
	}
	if a := emb.Advice; !strings.Contains(a, "fits its use") {
		t.Errorf("embedder advice %q", a)
	}
	nb := by["lab/nb-ann/notebook"]
	if !nb.HasCores || !near(nb.WastedGPUHours, 0.2) || nb.FitCores != 0 || nb.UsedCoresPeak != 0 {
		t.Errorf("notebook %+v, want its whole 20%% wasted for the hour", nb)
	}
	if a := nb.Advice; !strings.Contains(a, "release the share") {
		t.Errorf("notebook advice %q", a)
	}
}
