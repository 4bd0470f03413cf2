package web

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/schema"
)

var fixtureNow = time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)

func gpus(n int, host string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("GPU-%s-%d", host, i)
	}
	return out
}

// fixtureFindings: one or more of every pattern, four teams, four nodes.
func fixtureFindings() []finding.Finding {
	at := func(h float64) time.Time { return fixtureNow.Add(-time.Duration(h * float64(time.Hour))) }
	return []finding.Finding{
		{Pattern: schema.CPUOnly, Severity: schema.SeverityCritical, Job: "481920", JobName: "preprocess-shards", User: "alice", Team: "vision", Kind: "batch",
			Hostname: "gpu-a100-01", Scheduler: "slurm", ModelName: "NVIDIA A100-SXM4-80GB", GPUs: gpus(4, "a1"), Start: at(9.5), End: fixtureNow,
			WastedGPUHours: 38, Evidence: map[string]float64{"max_util_pct": 0, "max_fb_used_mib": 0, "gpu_processes": 0}, Action: schema.ActionReclaim,
			Advice: "Request no GPU for CPU-only preprocessing."},
		{Pattern: schema.Stuck, Severity: schema.SeverityCritical, Job: "481777", JobName: "llm-pretrain-7b", User: "bob", Team: "nlp", Kind: "batch",
			Hostname: "gpu-h100-01", Scheduler: "slurm", ModelName: "NVIDIA H100 80GB HBM3", GPUs: gpus(8, "h1"), Start: at(3.25), End: fixtureNow,
			WastedGPUHours: 26, Evidence: map[string]float64{"util_pct": 100, "power_w": 92, "sm_active": 0.01}, Action: schema.ActionCheckpoint,
			Advice: "A collective is spin-waiting: check NCCL for a lost rank."},
		{Pattern: schema.OverRequested, Severity: schema.SeverityWarning, Job: "481650", JobName: "resnet-sweep", User: "carol", Team: "vision", Kind: "batch",
			Hostname: "gpu-a100-02", Scheduler: "slurm", ModelName: "NVIDIA A100-SXM4-80GB", GPUs: gpus(8, "a2"), Start: at(6), End: fixtureNow,
			WastedGPUHours: 36, Evidence: map[string]float64{"idle_gpus": 6, "gpus": 8, "busy_util_pct": 91}, Action: schema.ActionResize,
			Advice: "Only 2 of 8 GPUs work: request 2."},
		{Pattern: schema.IdleSession, Severity: schema.SeverityWarning, Job: "jupyter/jupyter-dave", User: "dave", Team: "speech", Kind: "interactive",
			Hostname: "gpu-h100-02", Scheduler: "kubernetes", Namespace: "jupyter", Pod: "jupyter-dave", ModelName: "NVIDIA H100 80GB HBM3", GPUs: gpus(1, "h2"),
			Start: at(7), End: fixtureNow, WastedGPUHours: 6.5, Evidence: map[string]float64{"idle_hours": 6.5, "fb_used_mib": 3120}, Action: schema.ActionWarn},
		{Pattern: schema.LowUtilization, Severity: schema.SeverityInfo, Job: "ml-serving/embedder-7d9f", User: "erin", Team: "platform", Kind: "service",
			Hostname: "gpu-h100-02", Scheduler: "kubernetes", Namespace: "ml-serving", Pod: "embedder-7d9f", ModelName: "NVIDIA H100 80GB HBM3", GPUs: gpus(1, "h2b"),
			Start: at(70), End: fixtureNow, WastedGPUHours: 52.4, Evidence: map[string]float64{"mean_util_pct": 4.2, "peak_fb_used_gib": 9.1}, Action: schema.ActionResize,
			Advice: "Fits a 1g.10gb MIG slice."},
		{Pattern: schema.StartupOverhead, Severity: schema.SeverityInfo, Job: "481901", JobName: "asr-finetune", User: "frank", Team: "speech", Kind: "batch",
			Hostname: "gpu-a100-01", Scheduler: "slurm", ModelName: "NVIDIA A100-SXM4-80GB", GPUs: gpus(2, "a1b"), Start: at(2), End: at(1.2),
			WastedGPUHours: 1.6, Evidence: map[string]float64{"minutes_to_first_use": 48}, Action: schema.ActionNotify,
			Advice: "Stage the data set to local disk before the job starts."},
		{Pattern: schema.Overlong, Severity: schema.SeverityWarning, Job: "480012", JobName: "diffusion-xl", User: "grace", Team: "vision", Kind: "batch",
			Hostname: "gpu-h100-01", Scheduler: "slurm", ModelName: "NVIDIA H100 80GB HBM3", GPUs: gpus(4, "h1b"), Start: at(51), End: fixtureNow,
			WastedGPUHours: 12, Evidence: map[string]float64{"run_hours": 51, "max_run_hours": 48}, Action: schema.ActionCheckpoint},
		{Pattern: schema.OrphanProcess, Severity: schema.SeverityCritical, Job: "479990", User: "heidi", Team: "nlp", Kind: "batch",
			Hostname: "gpu-a100-02", Scheduler: "slurm", ModelName: "NVIDIA A100-SXM4-80GB", GPUs: gpus(1, "a2b"), Start: at(1.5), End: fixtureNow,
			WastedGPUHours: 1.5, Evidence: map[string]float64{"fb_used_mib": 30720, "pid": 77120}, Action: schema.ActionKill, PIDs: []int{77120}},
		{Pattern: schema.CPUOnly, Severity: schema.SeverityCritical, Job: "481955", JobName: "tokenize-corpus", User: "ivan", Team: "nlp", Kind: "batch",
			Hostname: "gpu-h100-01", Scheduler: "slurm", ModelName: "NVIDIA H100 80GB HBM3", GPUs: gpus(2, "h1c"), Start: at(2.5), End: fixtureNow,
			WastedGPUHours: 5, Evidence: map[string]float64{"max_util_pct": 0, "gpu_processes": 0}, Action: schema.ActionReclaim},
	}
}

type fakeFindings struct {
	fs  []finding.Finding
	err error
}

func (f fakeFindings) CurrentFindings(context.Context) ([]finding.Finding, error) {
	return append([]finding.Finding(nil), f.fs...), f.err
}

type fakeAudit struct{ es []AuditEntry }

func (f fakeAudit) RecentAudit(_ context.Context, limit int) ([]AuditEntry, error) {
	if limit < len(f.es) {
		return f.es[:limit], nil
	}
	return f.es, nil
}

func fixtureAudit() []AuditEntry {
	at := func(m int) time.Time { return fixtureNow.Add(-time.Duration(m) * time.Minute) }
	return []AuditEntry{
		{Time: at(5), Step: "reclaim", Actuator: "slurm", State: "dry_run", DryRun: true, Hostname: "gpu-a100-01", Job: "481920", User: "alice", Team: "vision", Pattern: "cpu_only", Detail: "would run scancel 481920"},
		{Time: at(35), Step: "checkpoint", Actuator: "slurm", State: "done", Hostname: "gpu-h100-01", Job: "481777", User: "bob", Team: "nlp", Pattern: "stuck", Detail: "scancel --signal=USR1 --full 481777"},
		{Time: at(36), Step: "checkpoint", Actuator: "slurm", State: "intended", Hostname: "gpu-h100-01", Job: "481777", User: "bob", Team: "nlp", Pattern: "stuck"},
		{Time: at(65), Step: "warn", Actuator: "alertmanager", State: "done", Hostname: "gpu-h100-02", Job: "jupyter/jupyter-dave", User: "dave", Team: "speech", Pattern: "idle_session"},
		{Time: at(90), Step: "warn", Actuator: "email", State: "failed", Hostname: "gpu-a100-01", Job: "481920", User: "alice", Team: "vision", Pattern: "cpu_only", Detail: "smtp: connection refused"},
	}
}

type fakeReports struct{ rs map[string]ReportSummary }

func (f fakeReports) LatestReports(context.Context) ([]ReportSummary, error) {
	var out []ReportSummary
	for _, r := range f.rs {
		out = append(out, r)
	}
	return out, nil
}

func (f fakeReports) ReportHTML(_ context.Context, team string) ([]byte, error) {
	r, ok := f.rs[team]
	if !ok {
		return nil, ErrNoReport
	}
	return []byte("<html><body><h1>Report " + r.Period + " " + team + "</h1></body></html>"), nil
}

func fixtureReports() fakeReports {
	gen := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	return fakeReports{rs: map[string]ReportSummary{
		"":       {Team: "", Period: "2026-W47", GeneratedAt: gen, AllocatedGPUHours: 5376, ActiveGPUHours: 3410, WastedGPUHours: 1220, TopPattern: schema.LowUtilization},
		"vision": {Team: "vision", Period: "2026-W47", GeneratedAt: gen, AllocatedGPUHours: 2016, ActiveGPUHours: 1302, WastedGPUHours: 480.5, TopPattern: schema.OverRequested},
		"nlp":    {Team: "nlp", Period: "2026-W47", GeneratedAt: gen, AllocatedGPUHours: 2352, ActiveGPUHours: 1650, WastedGPUHours: 410, TopPattern: schema.Stuck},
	}}
}

var errBoom = errors.New("database is locked")
