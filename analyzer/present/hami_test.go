package present

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/internal/hamitest"
)

// TestAnalyzeListsHAMiShares: an analysis of a store holding HAMi's
// recorded metrics lists each container's share in its table and JSON:
// the waste of reserved cores, and the quota that would fit.
func TestAnalyzeListsHAMiShares(t *testing.T) {
	e, err := engine.New(engine.Options{Querier: hamitest.Load(t, false, false), Config: config.Default()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := e.AnalyzeWindow(context.Background(), hamitest.At.Add(-time.Hour), hamitest.At)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Coverage.Shares) != 3 {
		t.Fatalf("shares %+v, want the three containers'", a.Coverage.Shares)
	}
	var tb bytes.Buffer
	if err := Table(&tb, a.Findings, &a.Coverage, a.Book); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"HAMi shares", "infer/llm-0/server on gpu-07", "0.38 GPU-h of reserved cores unused",
		"nvidia.com/gpucores: 20 and nvidia.com/gpumem: 8192", "lab/nb-ann/notebook", "release the share"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	var jb bytes.Buffer
	if err := JSON(&jb, a.Findings, &a.Coverage, a.Book); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Coverage struct {
			Shares []struct {
				Pod    string  `json:"pod"`
				Wasted float64 `json:"wasted_gpu_hours"`
				Advice string  `json:"advice"`
			} `json:"hami_shares"`
		} `json:"coverage"`
	}
	if err := json.Unmarshal(jb.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Coverage.Shares) != 3 {
		t.Fatalf("JSON coverage.hami_shares %+v, want three", doc.Coverage.Shares)
	}
	for _, s := range doc.Coverage.Shares {
		if s.Pod == "nb-ann" && (s.Wasted != 0.2 || !strings.Contains(s.Advice, "release the share")) {
			t.Errorf("JSON share of the idle notebook %+v", s)
		}
	}
}
