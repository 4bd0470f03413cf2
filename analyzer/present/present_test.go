package present

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/detect"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/store"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"now", now, false},
		{"-7d", now.Add(-7 * 24 * time.Hour), false},
		{"now-90m", now.Add(-90 * time.Minute), false},
		{"2026-05-01T00:00:00Z", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), false},
		{"yesterday", time.Time{}, true},
		{"-7x", time.Time{}, true},
	} {
		got, err := ParseTime(c.in, now)
		if (err != nil) != c.err || !got.Equal(c.want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

var t0 = time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)

var sample = []finding.Finding{
	{Pattern: schema.CPUOnly, Severity: schema.SeverityCritical, Job: "12", User: "ann", Team: "nlp", Kind: "batch", Hostname: "n1",
		GPUs: []string{"GPU-a", "GPU-b"}, WastedGPUHours: 4, Action: schema.ActionReclaim, Evidence: map[string]float64{"idle_minutes": 120},
		Start: t0, End: t0.Add(2 * time.Hour)},
	{Pattern: schema.LowUtilization, Severity: schema.SeverityInfo, Job: "ns/pod", Hostname: "n2", GPUs: []string{"GPU-c"},
		WastedGPUHours: 9.5, Action: schema.ActionResize, Evidence: map[string]float64{"mean_sm_active": 0.1},
		Start: t0, End: t0.Add(10 * time.Hour)},
}

// sampleBook accounts the sample: job 12 held 2 idle GPUs for 2 hours, the
// pod one busy GPU for 10 hours, of which its low use wasted 9.5.
func sampleBook() *accounting.Book {
	var us []store.Usage
	for h := 0; h < 10; h++ {
		s := t0.Add(time.Duration(h) * time.Hour)
		if h < 2 {
			us = append(us, store.Usage{Start: s, End: s.Add(time.Hour), Hostname: "n1", Job: "12", GPUs: 2, AllocatedGPUHours: 2})
		}
		us = append(us, store.Usage{Start: s, End: s.Add(time.Hour), Hostname: "n2", Job: "ns/pod", GPUs: 1, AllocatedGPUHours: 1, ActiveGPUHours: 1})
	}
	return accounting.Build(t0, t0.Add(24*time.Hour), us, sample)
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	if err := JSON(&b, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"findings": []`) {
		t.Errorf("empty result is %s, want an empty list", b.String())
	}
	b.Reset()
	if err := JSON(&b, sample, nil, sampleBook()); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Findings   []map[string]any   `json:"findings"`
		Accounting map[string]float64 `json:"accounting"`
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Accounting["allocated_gpu_hours"] != 14 || out.Accounting["wasted_gpu_hours"] != 13.5 || out.Accounting["used_gpu_hours"] != 0.5 {
		t.Errorf("accounting %v", out.Accounting)
	}
	for _, k := range []string{"pattern", "severity", "job", "user", "team", "kind", "hostname", "gpus", "start", "end", "wasted_gpu_hours", "evidence", "action"} {
		if _, ok := out.Findings[0][k]; !ok {
			t.Errorf("field %s missing from %v", k, out.Findings[0])
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, sample, nil, sampleBook()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	// Header, two rows sorted by waste, blank, two pattern totals, total,
	// the accounting.
	if len(lines) != 8 {
		t.Fatalf("table has %d lines:\n%s", len(lines), b.String())
	}
	if !strings.HasPrefix(lines[1], "9.50") || !strings.HasPrefix(lines[2], "4.00") {
		t.Errorf("rows not sorted by GPU-hours wasted:\n%s", b.String())
	}
	if !strings.HasPrefix(lines[6], "13.50") || !strings.Contains(lines[6], "TOTAL") || !strings.Contains(lines[6], "2 findings") {
		t.Errorf("total line %q", lines[6])
	}
	if lines[7] != "GPU-hours: 14.0 allocated, 0.5 used, 13.5 wasted (96.4% of allocated), 0.0 over the limit." {
		t.Errorf("accounting line %q", lines[7])
	}
	// Aligned: the PATTERN column starts at the same offset on every row.
	col := strings.Index(lines[0], "PATTERN")
	for _, l := range lines[1:3] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("misaligned row %q (PATTERN at %d)", l, col)
		}
	}
}

// TestTableEscapesTerminalControls: a finding's job, user and host come from
// users (and /proc); the analyze table shows them escaped, one row each.
func TestTableEscapesTerminalControls(t *testing.T) {
	fs := append([]finding.Finding(nil), sample...)
	fs[0].Job = "job\x1b[31m\nforged\trow"
	fs[0].User = "u\u202ex"
	var b bytes.Buffer
	if err := Table(&b, fs, nil, nil); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(b.String(), "\x1b\u202e") || !strings.Contains(b.String(), `job\x1b[31m\nforged\trow`) {
		t.Fatalf("table:\n%q", b.String())
	}
	if n := strings.Count(b.String(), "\n"); n != 3 {
		t.Fatalf("table has %d lines, want 3:\n%s", n, b.String())
	}
}

// TestTableSaysWhatDecidedTheKind: the KIND column names the owner fact or
// the name rule that decided each finding's kind.
func TestTableSaysWhatDecidedTheKind(t *testing.T) {
	fs := []finding.Finding{
		{Pattern: schema.IdleSession, Job: "research/train-job-7", Kind: schema.KindInteractive, KindSource: "owner Notebook kubeflow.org/v1 research/nb-1", WastedGPUHours: 2},
		{Pattern: schema.IdleSession, Job: "3052", Kind: schema.KindInteractive, KindSource: "Slurm batch flag", WastedGPUHours: 1},
		{Pattern: schema.Stuck, Job: "3053", Kind: schema.KindBatch, KindSource: "name"},
	}
	var b bytes.Buffer
	if err := Table(&b, fs, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"interactive (owner Notebook kubeflow.org/v1 research/nb-1)", "interactive (Slurm batch flag)", "batch (name)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestTableSaysWhichIdleFloor: analyze's table says, per GPU model, which
// idle floor of power judged it: learnt from how many idle steps of how
// many GPUs, or the published figure and why, or none.
func TestTableSaysWhichIdleFloor(t *testing.T) {
	cov := &engine.Coverage{From: time.Unix(0, 0), To: time.Unix(3600, 0), IdleFloors: []detect.IdleFloor{
		{Model: "NVIDIA L4", Watts: 36, Learned: true, Samples: 480, GPUs: 4, Needed: 36},
		{Model: "NVIDIA A100-SXM4-80GB", Watts: 55, Samples: 12, Needed: 36},
		{Model: "NVIDIA X9000", Needed: 36},
	}}
	var b bytes.Buffer
	if err := Table(&b, nil, cov, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Idle floor of NVIDIA L4: 36 W, learnt from 480 idle steps of 4 GPUs.",
		"Idle floor of NVIDIA A100-SXM4-80GB: 55 W, published (analyzer/gpumodel): 12 idle steps seen, 36 needed to learn it.",
		"Idle floor of NVIDIA X9000: none (a model the table does not know, 0 idle steps of 36 needed): power judged nothing on it.",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := JSON(&b, nil, cov, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"idle_floors"`) || !strings.Contains(b.String(), `"learned": true`) {
		t.Errorf("JSON lacks the idle floors:\n%s", b.String())
	}
}
