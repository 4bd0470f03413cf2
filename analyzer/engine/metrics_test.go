package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestMetrics(t *testing.T) {
	m := NewMetrics()
	f := finding.Finding{Pattern: schema.CPUOnly, Severity: schema.SeverityCritical, Job: "1", User: "ann", Team: "nlp", Hostname: "n1"}
	at := base
	for _, w := range []float64{2, 2.5, 3} { // the same finding over three cycles
		f.WastedGPUHours = w
		at = at.Add(5 * time.Minute)
		m.Observe(CycleResult{To: at, Findings: []finding.Finding{f}})
	}
	want := `
# HELP gpuwatch_analyzer_wasted_gpu_seconds_total GPU time classified as wasted by the analyzer, in GPU-seconds (divide by 3600 for GPU-hours), by node, waste pattern and team.
# TYPE gpuwatch_analyzer_wasted_gpu_seconds_total counter
gpuwatch_analyzer_wasted_gpu_seconds_total{hostname="n1",pattern="cpu_only",team="nlp"} 10800
# HELP gpuwatch_analyzer_findings Open findings after the last analyzer cycle, by node, pattern, severity and team.
# TYPE gpuwatch_analyzer_findings gauge
gpuwatch_analyzer_findings{hostname="n1",pattern="cpu_only",severity="critical",team="nlp"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), "gpuwatch_analyzer_wasted_gpu_seconds_total", "gpuwatch_analyzer_findings"); err != nil {
		t.Error(err)
	}
	// The finding closes: no open finding, the counter keeps its total.
	m.Observe(CycleResult{To: at.Add(5 * time.Minute)})
	if n := testutil.CollectAndCount(m, "gpuwatch_analyzer_findings"); n != 0 {
		t.Errorf("%d open finding series after the finding closed", n)
	}
	if n := testutil.CollectAndCount(m, "gpuwatch_analyzer_wasted_gpu_seconds_total"); n != 1 {
		t.Errorf("counter series: %d", n)
	}
}

// TestMetricsThrottled: the open straggler and throttled findings' throttled
// GPU-hours are published per node, in GPU-seconds; a GPU fault adds none.
func TestMetricsThrottled(t *testing.T) {
	m := NewMetrics()
	fs := []finding.Finding{
		{Pattern: schema.Straggler, Severity: schema.SeverityWarning, Job: "1", Hostname: "n1", Evidence: map[string]float64{"throttled_gpu_hours": 1.5}},
		{Pattern: schema.Throttled, Severity: schema.SeverityInfo, Job: "2", Hostname: "n1", Evidence: map[string]float64{"throttled_gpu_hours": 0.5}},
		{Pattern: schema.GPUFault, Severity: schema.SeverityCritical, Job: "3", Hostname: "n2", Evidence: map[string]float64{"xid": 79}},
	}
	m.Observe(CycleResult{To: base.Add(5 * time.Minute), Findings: fs})
	want := `
# HELP gpuwatch_analyzer_throttled_gpu_seconds ` + schema.AnalyzerThrottledGPUSeconds.Help + `
# TYPE gpuwatch_analyzer_throttled_gpu_seconds gauge
gpuwatch_analyzer_throttled_gpu_seconds{hostname="n1"} 7200
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), schema.AnalyzerThrottledGPUSeconds.Name); err != nil {
		t.Error(err)
	}
	if w := m.Accounting().Wasted; w != 0 {
		t.Errorf("health findings accounted %.2f wasted GPU-hours", w)
	}
}
