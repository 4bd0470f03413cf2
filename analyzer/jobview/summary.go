package jobview

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/internal/termsafe"
	"github.com/gpuwatch/gpuwatch/schema"
)

// SummaryPrefix starts every end-of-job summary, so that other tools'
// AdminComments are left alone and the format can change.
const SummaryPrefix = "gpuwatch1:"

// The summary is the report's figures in short JSON keys, deflated and
// base32-encoded in lower case: one word, no spaces, no quotes, and no
// meaning in letter case, because sacctmgr (Slurm 22.05) lowercases the
// AdminComment it stores in accounting while scontrol keeps it as given.
type compact struct {
	Job      string  `json:"j"`
	Sched    string  `json:"s,omitempty"`
	Host     string  `json:"h,omitempty"`
	User     string  `json:"u,omitempty"`
	Team     string  `json:"t,omitempty"`
	Account  string  `json:"a,omitempty"`
	Name     string  `json:"n,omitempty"`
	Kind     string  `json:"k,omitempty"`
	State    string  `json:"st,omitempty"`
	Start    int64   `json:"b,omitempty"`
	End      int64   `json:"e,omitempty"`
	Coverage float64 `json:"c,omitempty"`
	Short    string  `json:"x,omitempty"`
	Note     string  `json:"o,omitempty"`
	GPUs     []cgpu  `json:"g,omitempty"`
	CPU      *CPU    `json:"p,omitempty"`
	Finds    []cfind `json:"f,omitempty"`
	// Held is Totals.GPUHours where the job held less than its GPUs'
	// whole time (a share of a time-sliced GPU); absent, GPUs × span.
	Held float64 `json:"gh,omitempty"`
}

type cgpu struct {
	Index   string   `json:"i,omitempty"`
	UUID    string   `json:"d,omitempty"`
	Model   string   `json:"m,omitempty"`
	Samples int      `json:"n,omitempty"`
	UMean   *float64 `json:"um,omitempty"`
	UPeak   *float64 `json:"up,omitempty"`
	SMean   *float64 `json:"sm,omitempty"`
	MPeak   *float64 `json:"mp,omitempty"`
	MTotal  *float64 `json:"mt,omitempty"`
	Power   *float64 `json:"pw,omitempty"`
	Energy  *float64 `json:"en,omitempty"`
}

type cfind struct {
	Pattern  schema.Pattern     `json:"p"`
	Severity schema.Severity    `json:"s,omitempty"`
	Wasted   float64            `json:"w"`
	Start    int64              `json:"b,omitempty"`
	End      int64              `json:"e,omitempty"`
	Evidence map[string]float64 `json:"v,omitempty"`
	// GPU is a health finding's one GPU.
	GPU string `json:"g,omitempty"`
}

func r3(v *float64) *float64 {
	if v == nil {
		return nil
	}
	x := math.Round(*v*1000) / 1000
	return &x
}

// EncodeSummary packs the report into at most maxBytes (dropping, in turn,
// the findings' evidence, the GPU UUIDs and the per-GPU figures when it
// does not fit). A nil report with a note makes the short summary written
// when no figures could be had.
func EncodeSummary(r *Report, note string, maxBytes int) (string, error) {
	c := compact{Note: note}
	if r != nil {
		c = compact{Job: r.Job, Sched: r.Scheduler, Host: r.Hostname, User: r.User, Team: r.Team, Account: r.Account,
			Name: r.JobName, Kind: r.Kind, State: r.State,
			Coverage: math.Round(r.Coverage*1000) / 1000, Short: r.NotEnoughData, Note: note, CPU: r.CPU}
		if !r.Start.IsZero() {
			c.Start, c.End = r.Start.Unix(), r.End.Unix()
		}
		if whole := float64(len(r.GPUs)) * r.DurationHours; r.Totals.GPUHours < whole-1e-3 {
			c.Held = math.Round(r.Totals.GPUHours*1000) / 1000
		}
		for _, g := range r.GPUs {
			c.GPUs = append(c.GPUs, cgpu{Index: g.Index, UUID: g.UUID, Model: g.Model, Samples: g.Samples, UMean: r3(g.UtilMean),
				UPeak: r3(g.UtilPeak), SMean: r3(g.SMActiveMean), MPeak: r3(g.MemPeakMiB), MTotal: r3(g.MemTotalMiB),
				Power: r3(g.PowerMeanW), Energy: r3(g.EnergyKWh)})
		}
		for _, f := range r.Findings {
			c.Finds = append(c.Finds, cfind{Pattern: f.Pattern, Severity: f.Severity, Wasted: f.WastedGPUHours,
				Start: f.Start.Unix(), End: f.End.Unix(), Evidence: f.Evidence, GPU: f.GPU})
		}
	}
	shrink := []func(){
		func() {
			// Evidence goes, but for what the health findings' sentences
			// and the totals are made of.
			for i := range c.Finds {
				c.Finds[i].Evidence = keepHealth(c.Finds[i].Evidence)
			}
		},
		func() {
			for i := range c.GPUs {
				c.GPUs[i].UUID = ""
			}
		},
		func() { c.GPUs = nil },
		func() { c.Finds, c.Short, c.Note = nil, cut(c.Short, 80), cut(c.Note, 80) },
	}
	for i := 0; ; i++ {
		s, err := pack(c)
		if err != nil {
			return "", err
		}
		if len(s) <= maxBytes {
			return s, nil
		}
		if i == len(shrink) {
			return "", fmt.Errorf("summary of %d bytes does not fit in %d", len(s), maxBytes)
		}
		shrink[i]()
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func pack(c compact) (string, error) {
	raw, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("encode summary: %w", err)
	}
	var b bytes.Buffer
	zw, err := flate.NewWriter(&b, flate.BestCompression)
	if err != nil {
		return "", fmt.Errorf("encode summary: %w", err)
	}
	zw.Write(raw) //nolint:errcheck // writes to memory
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("encode summary: %w", err)
	}
	return SummaryPrefix + summaryEncoding.EncodeToString(b.Bytes()), nil
}

var summaryEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// maxSummaryJSON bounds the inflated summary: a comment is foreign input.
const maxSummaryJSON = 64 << 10

// DecodeSummary reads a summary back into a report (Source admin_comment).
func DecodeSummary(s string) (*Report, error) {
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, SummaryPrefix)
	if !ok {
		return nil, errors.New("admin comment holds no gpuwatch summary")
	}
	z, err := summaryEncoding.DecodeString(strings.ToLower(body))
	if err != nil {
		return nil, fmt.Errorf("decode summary: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(flate.NewReader(bytes.NewReader(z)), maxSummaryJSON+1))
	if err != nil {
		return nil, fmt.Errorf("decode summary: %w", err)
	}
	if len(raw) > maxSummaryJSON {
		return nil, errors.New("decode summary: too large")
	}
	var c compact
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("decode summary: %w", err)
	}
	r := &Report{Job: c.Job, Scheduler: c.Sched, Hostname: c.Host, User: c.User, Team: c.Team, Account: c.Account,
		JobName: c.Name, Kind: c.Kind, State: c.State, Coverage: c.Coverage, NotEnoughData: c.Short, Note: c.Note,
		CPU: c.CPU, Source: "admin_comment", Findings: []Finding{}}
	if c.Start > 0 {
		r.Start, r.End = time.Unix(c.Start, 0).UTC(), time.Unix(c.End, 0).UTC()
		r.DurationHours = r.End.Sub(r.Start).Hours()
	}
	models := map[string]bool{}
	var uuids []string
	for _, g := range c.GPUs {
		gpu := GPU{Device: g.UUID, UUID: g.UUID, Index: g.Index, Model: g.Model, Samples: g.Samples, UtilMean: g.UMean, UtilPeak: g.UPeak,
			SMActiveMean: g.SMean, MemPeakMiB: g.MPeak, MemTotalMiB: g.MTotal, PowerMeanW: g.Power, EnergyKWh: g.Energy}
		if g.MPeak != nil && g.MTotal != nil && *g.MTotal > 0 {
			sh := *g.MPeak / *g.MTotal
			gpu.MemPeakShare = &sh
		}
		if g.Model != "" && !models[g.Model] {
			models[g.Model] = true
			r.Models = append(r.Models, g.Model)
		}
		uuids = append(uuids, g.UUID)
		r.GPUs = append(r.GPUs, gpu)
		if g.Energy != nil {
			r.Totals.EnergyKWh += *g.Energy
		}
	}
	r.Totals.GPUHours = float64(len(r.GPUs)) * r.DurationHours
	if c.Held > 0 {
		r.Totals.GPUHours = c.Held
	}
	model := ""
	if len(r.Models) > 0 {
		model = r.Models[0]
	}
	for _, f := range c.Finds {
		fd := finding.Finding{Pattern: f.Pattern, Severity: f.Severity, Job: c.Job, User: c.User, Team: c.Team, Kind: c.Kind,
			Hostname: c.Host, ModelName: model, GPUs: uuids, GPU: f.GPU, WastedGPUHours: f.Wasted, Evidence: f.Evidence,
			Start: time.Unix(f.Start, 0).UTC(), End: time.Unix(f.End, 0).UTC()}
		fd.Advice = report.Advise(&fd)
		r.Findings = append(r.Findings, Finding{Finding: fd})
		r.Totals.WastedGPUHours += f.Wasted
		r.Totals.DegradedGPUHours += f.Evidence[schema.EvidenceDegraded]
		if f.Pattern == schema.GPUFault && f.Evidence["ended_by_fault"] > 0 {
			r.Health = &Health{EndedByFault: fd.Advice}
		}
	}
	return r, nil
}

// ErrForeignSummary marks an AdminComment whose summary names another job
// or another user than the scheduler's record it was read from.
var ErrForeignSummary = errors.New("the summary is not this job's")

// Summary decodes the end-of-job summary in the job's AdminComment. It is
// believed only when the job id and the user inside it are the
// scheduler's own for this job: a summary copied from another job (or
// written by anyone but gpuwatch for this one) is refused.
func (s *Scheduler) Summary() (*Report, error) {
	if s == nil || s.AdminComment == "" {
		return nil, errors.New("no summary in AdminComment")
	}
	r, err := DecodeSummary(s.AdminComment)
	if err != nil {
		return nil, err
	}
	if s.ID == "" || r.Job != s.ID || r.User != s.User {
		return nil, fmt.Errorf("%w: it names job %s of user %s, Slurm says job %s of user %s", ErrForeignSummary,
			termsafe.String(r.Job), termsafe.String(r.User), s.ID, s.User)
	}
	return r, nil
}

// WriteSummary builds the job's view within ctx's deadline and writes its
// summary into the job's AdminComment; when the figures cannot be had in
// time (Prometheus slow, down, or without the job) it writes a short note
// saying why instead. wctx bounds the write itself.
func WriteSummary(ctx, wctx context.Context, s *Slurm, o Options, ref Ref, logger *slog.Logger) error {
	if sc, err := s.Job(ctx, ref.Slurm); err == nil {
		o.Scheduler = sc
	}
	var comment string
	r, err := Build(ctx, o, ref)
	if err == nil && r.Job != ref.String() {
		// Only what gpuwatch computed for this job id is ever written.
		err = fmt.Errorf("the view built is of job %q, not %q", r.Job, ref)
	}
	if err == nil {
		comment, err = EncodeSummary(r, "", maxCommentBytes)
	}
	if err != nil {
		note := "no summary: " + err.Error()
		var uerr *url.Error
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			note = "no summary: telemetry did not answer in time"
		case errors.As(err, &uerr):
			note = "no summary: telemetry unreachable: " + uerr.Err.Error()
		}
		logger.Warn("job summary not made; writing a note", "job", ref, "err", err)
		if comment, err = EncodeSummary(noteReport(ref, o.Scheduler), cut(note, 200), maxCommentBytes); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(wctx, writeTimeout)
	defer cancel()
	return s.SetAdminComment(wctx, ref.Slurm, comment)
}

// writeTimeout bounds scontrol and sacctmgr together; the epilog
// companion leaves this much after the figures' budget.
const writeTimeout = 5 * time.Second

// noteReport is what a note without figures still says: what Slurm tells
// of the job, so accounting keeps whose job it was and how it ended.
func noteReport(ref Ref, sc *Scheduler) *Report {
	r := &Report{Job: ref.String(), Scheduler: schema.SchedulerSlurm}
	if sc != nil {
		r.State, r.User, r.Account, r.JobName = strings.ToLower(sc.State), sc.User, sc.Account, sc.Name
		if !sc.Start.IsZero() && !sc.End.Before(sc.Start) {
			r.Start, r.End = sc.Start, sc.End
		}
	}
	return r
}

// healthKeys are the evidence a summary keeps when it must shed evidence:
// what the health findings' sentences and the degraded total are made of.
var healthKeys = []string{schema.EvidenceDegraded, "ended_by_fault", "xid", "slowdown", "throttle_share"}

func keepHealth(ev map[string]float64) map[string]float64 {
	var out map[string]float64
	for _, k := range healthKeys {
		if v, ok := ev[k]; ok {
			if out == nil {
				out = map[string]float64{}
			}
			out[k] = v
		}
	}
	return out
}
