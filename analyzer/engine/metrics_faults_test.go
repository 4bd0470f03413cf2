package engine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

// TestMetricsGPUFaults: the fault metric counts the open gpu_fault
// findings' GPUs per node, a shared GPU's once, while the findings gauge
// still shows every holder's finding; an application XID is no fault.
func TestMetricsGPUFaults(t *testing.T) {
	at := base.Add(time.Hour)
	fault := func(host, job, gpu string) finding.Finding {
		return finding.Finding{Pattern: schema.GPUFault, Severity: schema.SeverityCritical, Hostname: host, Job: job, Team: "inf",
			GPU: gpu, GPUs: []string{gpu}, Start: at, End: at.Add(10 * time.Minute), Evidence: map[string]float64{"xid": 79}}
	}
	app := fault("n2", "ns/e", "GPU-c")
	app.Pattern, app.Severity = schema.AppXID, schema.SeverityInfo
	fs := []finding.Finding{fault("n1", "ns/a", "GPU-a"), fault("n1", "ns/b", "GPU-a"), fault("n1", "ns/c", "GPU-a/1"),
		fault("n1", "ns/d", "GPU-b"), app}
	m := NewMetrics()
	m.Observe(CycleResult{To: at.Add(10 * time.Minute), Findings: fs})
	want := `
# HELP gpuwatch_analyzer_gpu_faults ` + schema.AnalyzerGPUFaults.Help + `
# TYPE gpuwatch_analyzer_gpu_faults gauge
gpuwatch_analyzer_gpu_faults{hostname="n1"} 2
# HELP gpuwatch_analyzer_findings ` + schema.AnalyzerFindings.Help + `
# TYPE gpuwatch_analyzer_findings gauge
gpuwatch_analyzer_findings{hostname="n1",pattern="gpu_fault",severity="critical",team="inf"} 4
gpuwatch_analyzer_findings{hostname="n2",pattern="app_xid",severity="info",team="inf"} 1
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(want), schema.AnalyzerGPUFaults.Name, schema.AnalyzerFindings.Name); err != nil {
		t.Error(err)
	}
	// The faults close: no series left.
	m.Observe(CycleResult{To: at.Add(20 * time.Minute)})
	if n := testutil.CollectAndCount(m, schema.AnalyzerGPUFaults.Name); n != 0 {
		t.Errorf("%d fault series after the findings closed", n)
	}
}
