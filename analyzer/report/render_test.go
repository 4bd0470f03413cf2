package report

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/facts"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

func TestRender(t *testing.T) {
	t.Parallel()
	st := handStore(t)
	b := &Builder{Data: st, Config: handConfig(t), Now: func() time.Time { return w47.Add(8 * 24 * time.Hour) }}
	r, err := b.Build(context.Background(), WeekOf(w47, time.UTC), "ml")
	if err != nil {
		t.Fatal(err)
	}
	r.TopJobs[0].JobName = `<script>alert("x")</script>` // user-controlled text must stay text
	rd, err := NewRenderer()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []ImageMode{ImagesCID, ImagesDataURI} {
		out, err := rd.Render(r, mode)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 2 {
			t.Fatalf("%d images, want daily and patterns", len(out.Images))
		}
		for _, im := range out.Images {
			cfg, err := png.DecodeConfig(bytes.NewReader(im.PNG))
			if err != nil {
				t.Fatalf("%s is not a PNG: %v", im.CID, err)
			}
			if cfg.Width < im.Width || cfg.Height < im.Height {
				t.Errorf("%s is %dx%d, smaller than its %dx%d display size", im.CID, cfg.Width, cfg.Height, im.Width, im.Height)
			}
			ref := `src="cid:` + im.CID + `"`
			if mode == ImagesDataURI {
				ref = `src="data:image/png;base64,`
			}
			if !strings.Contains(out.HTML, ref) {
				t.Errorf("mode %d: HTML lacks %s", mode, ref)
			}
		}
		lower := strings.ToLower(out.HTML)
		if strings.Contains(lower, "<script") || strings.Contains(lower, "<style") || strings.Contains(lower, "javascript:") {
			t.Errorf("HTML has scripts or a style block (mail clients strip them)")
		}
		if !strings.Contains(out.HTML, "&lt;script&gt;") {
			t.Errorf("job name not escaped")
		}
		// The same numbers in both parts.
		for _, want := range []string{"37.0", "27.0", "9.0", "24.3%", "12.0", "108 EUR", "18.00 EUR", "82.2%", "52.9%", "MIG 1g.10gb", "2026-W46", "https://grafana.example.org/d/gpuwatch-job/gpuwatch-job?"} {
			if !strings.Contains(out.Text, want) {
				t.Errorf("text part lacks %q", want)
			}
			if !strings.Contains(out.HTML, strings.ReplaceAll(want, "&", "&amp;")) {
				t.Errorf("HTML part lacks %q", want)
			}
		}
		if out.Subject != "[gpuwatch] GPU waste, team ml, week 2026-W47: 9.0 GPU-hours wasted (24.3% of 37.0 allocated)" {
			t.Errorf("subject %q", out.Subject)
		}
		msg := out.Message([]string{"ml@example.org"})
		if len(msg.Inline) != 2 || msg.Inline[0].ContentType != "image/png" || msg.HTML != out.HTML {
			t.Errorf("message %+v", msg.Inline)
		}
	}
	j, err := JSON(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(j, &back); err != nil || back.Totals != r.Totals || back.Period.Label != "2026-W47" {
		t.Errorf("JSON round trip: %v %+v", err, back.Totals)
	}
}

func TestRenderEmptyWeek(t *testing.T) {
	t.Parallel()
	st := handStore(t)
	b := &Builder{Data: st, Config: handConfig(t)}
	r, err := b.Build(context.Background(), WeekOf(w47.AddDate(0, 0, -70), time.UTC), "ml")
	if err != nil {
		t.Fatal(err)
	}
	rd, _ := NewRenderer()
	out, err := rd.Render(r, ImagesCID)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Images) != 1 || !strings.Contains(out.Text, "Wasted:         0.0 GPU-hours") {
		t.Errorf("empty week: %d images, text:\n%s", len(out.Images), out.Text)
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{gh(1234567.89), "1,234,567.9"}, {gh(0), "0.0"}, {gh(-1234.5), "-1,234.5"},
		{money(99.5, "EUR"), "99.50 EUR"}, {money(12345.6, "USD"), "12,346 USD"}, {money(3, ""), "3.00"},
		{pct(0.1234), "12.3%"},
		{change([]TrendRow{{Label: "W1", AllocatedGPUHours: 10, WastedShare: 0.2}, {Label: "W2", WastedShare: 0.1}}), "down 10.0 points from W1 (20.0%) — better"},
		{change([]TrendRow{{Label: "W1", AllocatedGPUHours: 10, WastedShare: 0.2}, {Label: "W2", WastedShare: 0.25}}), "up 5.0 points from W1 (20.0%) — worse"},
		{change([]TrendRow{{Label: "W1"}, {Label: "W2"}}), "no usage in W1 to compare with"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestAdvise(t *testing.T) {
	cases := []struct {
		name string
		f    finding.Finding
		want []string
	}{
		{"A100-80GB fits 1g.10gb", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA A100-SXM4-80GB",
			Evidence: map[string]float64{"mean_util_percent": 9, "fb_max_mib": 7000}}, []string{"9%", "6.8 GiB", "MIG 1g.10gb", "1/7"}},
		{"A100-40GB needs 3g.20gb", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA A100-SXM4-40GB",
			Evidence: map[string]float64{"fb_max_mib": 12 * 1024}}, []string{"MIG 3g.20gb"}},
		{"H200", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA H200",
			Evidence: map[string]float64{"fb_max_mib": 25 * 1024}}, []string{"MIG 2g.35gb"}},
		{"L40S has no MIG: smaller GPU", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA L40S",
			Evidence: map[string]float64{"fb_max_mib": 10000}}, []string{"the T4 (16 GB)"}},
		{"L40S, too big for a smaller GPU", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA L40S",
			Evidence: map[string]float64{"fb_max_mib": 30000}}, []string{"batch more work"}},
		{"no memory evidence", finding.Finding{Pattern: schema.LowUtilization}, []string{"MIG slice or a smaller GPU"}},
		{"over-requested", finding.Finding{Pattern: schema.OverRequested, GPUs: []string{"a", "b", "c", "d"},
			Evidence: map[string]float64{"idle_gpus": 3}}, []string{"1 of 4 GPUs", "--gres=gpu:1"}},
		{"overlong", finding.Finding{Pattern: schema.Overlong}, []string{"checkpoint", "SIGUSR1"}},
		{"startup", finding.Finding{Pattern: schema.StartupOverhead, Evidence: map[string]float64{"delay_minutes": 30}}, []string{"30 minutes", "stage data"}},
		{"cpu only", finding.Finding{Pattern: schema.CPUOnly, GPUs: []string{"a"}}, []string{"1 GPU", "CPU partition"}},
		// A pod's owner edits resources.limits, not sbatch flags.
		{"A100-80GB slice for a pod", finding.Finding{Pattern: schema.LowUtilization, ModelName: "NVIDIA A100-SXM4-80GB", Scheduler: schema.SchedulerKubernetes,
			Evidence: map[string]float64{"fb_max_mib": 7000}}, []string{"MIG 1g.10gb", "nvidia.com/mig-1g.10gb: 1"}},
		{"over-requested pod", finding.Finding{Pattern: schema.OverRequested, Scheduler: schema.SchedulerKubernetes, GPUs: []string{"a", "b", "c", "d"},
			Evidence: map[string]float64{"idle_gpus": 3}}, []string{"1 of 4 GPUs", "nvidia.com/gpu: 1 in the pod's resources.limits"}},
		{"over-requested pod of a stored finding without scheduler", finding.Finding{Pattern: schema.OverRequested, Pod: "p", Namespace: "ml", GPUs: []string{"a", "b"},
			Evidence: map[string]float64{"idle_gpus": 1}}, []string{"nvidia.com/gpu: 1"}},
		{"overlong pod", finding.Finding{Pattern: schema.Overlong, Scheduler: schema.SchedulerKubernetes}, []string{"checkpoint", "SIGTERM"}},
		{"startup pod", finding.Finding{Pattern: schema.StartupOverhead, Scheduler: schema.SchedulerKubernetes}, []string{"init container"}},
		{"cpu only pod", finding.Finding{Pattern: schema.CPUOnly, Scheduler: schema.SchedulerKubernetes, GPUs: []string{"a"}}, []string{"1 GPU", "drop nvidia.com/gpu"}},
		{"unknown pattern keeps the analyzer's advice", finding.Finding{Pattern: "future", Advice: "do X"}, []string{"do X"}},
	}
	for _, tc := range cases {
		got := Advise(&tc.f)
		if facts.SchedulerOf(&tc.f) == schema.SchedulerKubernetes && (strings.Contains(got, "--gres") || strings.Contains(got, "partition") || strings.Contains(got, "SIGUSR1")) {
			t.Errorf("%s: a pod gets Slurm advice %q", tc.name, got)
		}
		if facts.SchedulerOf(&tc.f) == schema.SchedulerSlurm && strings.Contains(got, "nvidia.com/") {
			t.Errorf("%s: a Slurm job gets Kubernetes advice %q", tc.name, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: advice %q lacks %q", tc.name, got, w)
			}
		}
	}
}
