// Package jobview is what one user sees about one job: who held which GPUs
// when, how much of each GPU the job used (utilization, SM activity,
// memory, power and energy), how busy its CPUs were, and what the
// analyzer's detectors found in it, with advice. Every figure is one PromQL
// aggregate over the job's own series in the window its samples span, read
// through the same query.Querier as the analyzer (Prometheus or the
// embedded store); the findings come from the analyzer's engine run over
// the job's devices only.
package jobview

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/config"
	"github.com/gpuwatch/gpuwatch/analyzer/engine"
	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/analyzer/finding"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/analyzer/report"
	"github.com/gpuwatch/gpuwatch/schema"
)

// ErrNoData: the query backend holds no series of the job in the lookback.
var ErrNoData = errors.New("no telemetry for this job")

// Ref names a job: a Slurm job id (hpc_job), or a Kubernetes namespace/pod.
type Ref struct {
	Slurm          string
	Namespace, Pod string
	// exported: the pod's series name it in exported_namespace and
	// exported_pod, as Prometheus renames dcgm-exporter's holder labels
	// when it scrapes with honor_labels: false (namespace and pod are then
	// the exporter's own). Build learns it from the data.
	exported bool
}

var (
	slurmID  = regexp.MustCompile(`^[0-9]{1,12}(_[0-9]{1,12})?$`)
	k8sName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	maxNSLen = 63
)

// ParseRef reads a job reference as users type it.
func ParseRef(s string) (Ref, error) {
	if slurmID.MatchString(s) {
		return Ref{Slurm: s}, nil
	}
	ns, pod, ok := strings.Cut(s, "/")
	if ok && len(ns) <= maxNSLen && k8sName.MatchString(ns) && k8sName.MatchString(pod) {
		return Ref{Namespace: ns, Pod: pod}, nil
	}
	return Ref{}, fmt.Errorf("job %q: want a Slurm job id (1234 or 1234_5) or namespace/pod", s)
}

// String is the job id as the analyzer's findings spell it.
func (r Ref) String() string {
	if r.Slurm != "" {
		return r.Slurm
	}
	return r.Namespace + "/" + r.Pod
}

// Selector returns the label matchers that pick the job's GPU series.
func (r Ref) Selector() string {
	if r.Slurm != "" {
		return "{" + eq(schema.LabelHPCJob, r.Slurm) + "}"
	}
	ns, pod := schema.LabelNamespace, schema.LabelPod
	if r.exported {
		ns, pod = features.ExportedPrefix+ns, features.ExportedPrefix+pod
	}
	return "{" + eq(ns, r.Namespace) + "," + eq(pod, r.Pod) + "}"
}

// JobSelector picks the job's series that name it by job_id
// (gpuwatch_allocation_info, gpuwatch_job_cpu_seconds_total).
func (r Ref) JobSelector() string { return "{" + eq(schema.LabelJob, r.String()) + "}" }

func eq(name, value string) string {
	return labels.MustNewMatcher(labels.MatchEqual, name, value).String()
}

// Scheduler facts about a job, when the scheduler still knows it. They win
// over what the telemetry suggests (state, owner), and the CPUs it was given
// turn CPU time into an efficiency.
type Scheduler struct {
	// ID is the scheduler's own id of the job.
	ID      string
	State   string
	User    string
	Account string
	Name    string
	CPUs    int
	Start   time.Time
	End     time.Time
	// AdminComment is the job's AdminComment, where the end-of-job summary lives.
	AdminComment string
}

// Options of Build.
type Options struct {
	Querier query.Querier
	Config  config.Config
	Now     time.Time
	// Lookback bounds the search for the job's series (default 30 days).
	Lookback time.Duration
	// Points is the number of points of each sparkline (default 40).
	Points int
	// Scheduler holds what Slurm says of the job, when it was asked.
	Scheduler *Scheduler
}

// Report is the job view. Its JSON form is documented in docs/job.md.
type Report struct {
	Job       string `json:"job"`
	Scheduler string `json:"scheduler"`
	Hostname  string `json:"hostname"`
	User      string `json:"user"`
	Team      string `json:"team"`
	Account   string `json:"account,omitempty"`
	JobName   string `json:"job_name,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// State is Slurm's job state when Slurm was asked, else running or
	// ended as the telemetry shows it.
	State string    `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Window is the range, in PromQL, over which every figure was taken:
	// the instant queries run at End over [Window].
	Window        string   `json:"window"`
	DurationHours float64  `json:"duration_hours"`
	Models        []string `json:"models"`
	GPUs          []GPU    `json:"gpus"`
	CPU           *CPU     `json:"cpu,omitempty"`
	// Coverage is the share of the job's span its samples cover, each GPU
	// judged against its own scrape interval, for the least covered GPU
	// (1 = no gap).
	Coverage float64 `json:"coverage"`
	// NotEnoughData says why the figures cannot be trusted, when they cannot.
	NotEnoughData string    `json:"not_enough_data,omitempty"`
	Findings      []Finding `json:"findings"`
	Totals        Totals    `json:"totals"`
	// Health says which of the health signals (docs/health.md) the job's
	// series carry, and whether the job ended of a GPU fault.
	Health *Health `json:"health,omitempty"`
	// Source is where the figures come from: query (Prometheus or the
	// embedded store) or admin_comment (the end-of-job summary).
	Source string `json:"source"`
	// Note explains a summary that could not be made at the job's end.
	Note string `json:"note,omitempty"`
}

// GPU is one device (or MIG instance) of the job. Absent figures are null.
type GPU struct {
	Device     string `json:"device"`
	UUID       string `json:"uuid"`
	Index      string `json:"gpu"`
	Model      string `json:"model"`
	MIGProfile string `json:"mig_profile,omitempty"`
	Samples    int    `json:"samples"`
	// Utilization in percent (DCGM_FI_DEV_GPU_UTIL).
	UtilMean *float64 `json:"util_mean_percent"`
	UtilPeak *float64 `json:"util_peak_percent"`
	// SM activity as a ratio 0-1 (DCGM_FI_PROF_SM_ACTIVE), where exported.
	SMActiveMean *float64 `json:"sm_active_mean"`
	SMActivePeak *float64 `json:"sm_active_peak"`
	// Memory in MiB: the peak used and the device's total (peak used plus
	// the least free), and their ratio.
	MemPeakMiB   *float64 `json:"memory_peak_mib"`
	MemTotalMiB  *float64 `json:"memory_total_mib"`
	MemPeakShare *float64 `json:"memory_peak_share"`
	PowerMeanW   *float64 `json:"power_mean_watts"`
	// EnergyKWh is the increase of the energy counter, else mean power
	// times duration (EnergyFrom says which).
	EnergyKWh  *float64 `json:"energy_kwh"`
	EnergyFrom string   `json:"energy_from,omitempty"`
	Coverage   float64  `json:"coverage"`
	// Sparklines: per-interval mean utilization (percent) and peak memory
	// (MiB), SparkStep apart, ending at the job's end.
	SparkUtil []*float64 `json:"spark_util_percent,omitempty"`
	SparkMem  []*float64 `json:"spark_memory_mib,omitempty"`
	SparkStep string     `json:"spark_step,omitempty"`
}

// CPU is the job's CPU use from its cgroup (gpuwatch_job_cpu_seconds_total).
type CPU struct {
	Seconds   float64 `json:"seconds"`
	MeanCores float64 `json:"mean_cores"`
	// Allocated and Efficiency are set when the scheduler said how many
	// CPUs the job had.
	Allocated  int      `json:"allocated,omitempty"`
	Efficiency *float64 `json:"efficiency,omitempty"`
}

// Finding is an analyzer finding on the job, with the advice reports give.
type Finding struct {
	finding.Finding
	// Detail is the detector's own sentence; Advice is the change that
	// would have avoided the waste.
	Detail string `json:"detail,omitempty"`
}

// Totals of the job.
type Totals struct {
	GPUHours       float64 `json:"gpu_hours"`
	WastedGPUHours float64 `json:"wasted_gpu_hours"`
	// DegradedGPUHours: slowed by throttled or faulty GPUs (the
	// accounting's degraded total), never waste.
	DegradedGPUHours float64 `json:"degraded_gpu_hours"`
	EnergyKWh        float64 `json:"energy_kwh"`
}

const (
	defaultLookback = 30 * 24 * time.Hour
	defaultPoints   = 40
	// coarsePoints is how finely the lookback is searched for the job's
	// first and last buckets; the window is then found to the second in
	// those two buckets.
	coarsePoints = 720
	// mJPerKWh converts DCGM's energy counter (mJ) to kWh.
	mJPerKWh = 3.6e9
	parallel = 4
)

// Build reads the job view.
func Build(ctx context.Context, o Options, ref Ref) (*Report, error) {
	if o.Querier == nil {
		return nil, errors.New("job view: no querier")
	}
	if o.Config.Step == 0 {
		o.Config = config.Default()
	}
	if o.Lookback <= 0 {
		o.Lookback = defaultLookback
	}
	if o.Points <= 0 {
		o.Points = defaultPoints
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	o.Now = o.Now.Truncate(time.Second)
	sel := ref.Selector()
	start, end, devs, err := locate(ctx, o, sel)
	if errors.Is(err, ErrNoData) && ref.Slurm == "" {
		// Not under the workload's own labels: perhaps under the names
		// honor_labels: false gives them.
		ex := ref
		ex.exported = true
		if s, e, d, xerr := locate(ctx, o, ex.Selector()); xerr == nil {
			ref, sel, start, end, devs, err = ex, ex.Selector(), s, e, d, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", ref, err)
	}
	r := &Report{Job: ref.String(), Start: start, End: end, Source: "query", Findings: []Finding{}}
	if ref.Slurm != "" {
		r.Scheduler = schema.SchedulerSlurm
	} else {
		r.Scheduler = schema.SchedulerKubernetes
		r.Team = ref.Namespace
	}
	w := end.Sub(start) + time.Millisecond
	r.Window = model.Duration(w).String()
	r.DurationHours = end.Sub(start).Hours()
	// The findings do not depend on the figures: they are read side by
	// side, and the figures must be in place before the sparklines.
	var fs []Finding
	done := make(chan error, 1)
	go func() {
		var err error
		fs, err = findings(ctx, o, ref, r.Start, r.End, devs)
		done <- err
	}()
	err = figures(ctx, o, ref, r, devs, w)
	if err == nil {
		r.Health, err = healthSignals(ctx, o, ref, r.End)
	}
	if err == nil {
		err = sparklines(ctx, o, sel, r)
	}
	if ferr := <-done; err == nil {
		err = ferr
	}
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", ref, err)
	}
	for _, f := range fs {
		r.Findings = append(r.Findings, f)
		if r.User == "" {
			r.User, r.Team, r.Kind = f.User, f.Team, f.Kind
		}
	}
	r.finish(o)
	return r, nil
}

// device is one GPU of the job as its series name it.
type device struct {
	key                          string // UUID, or UUID/GI
	uuid, gi, index, model, prof string
	host                         string
}

func deviceKey(m model.Metric) string {
	k := string(m[schema.LabelUUID])
	if gi := m[schema.LabelGIID]; gi != "" {
		k += "/" + string(gi)
	}
	return k
}

// locate finds the job's devices and the first and last sample of its
// series within the lookback: a coarse pass over the whole lookback, then
// a pass at one-second resolution over the first and the last bucket.
func locate(ctx context.Context, o Options, sel string) (time.Time, time.Time, []device, error) {
	bucket := (o.Lookback / coarsePoints).Round(time.Second)
	bucket = max(bucket, time.Second)
	from := o.Now.Add(-o.Lookback).Add(bucket)
	fb := schema.FBUsed.Name + sel
	// Every bucket is (t-bucket, t]: its range is a millisecond short, so
	// that Prometheus 2.x (closed on the left) and 3.x (open) agree on a
	// sample sitting on an edge, as a 60 s scrape aligned to the minute does.
	v, err := o.Querier.QueryRange(ctx, fmt.Sprintf("count_over_time(%s[%s])", fb, rangeOf(bucket-time.Millisecond)),
		query.Range{Start: from, End: o.Now, Step: bucket})
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	m, _ := v.(model.Matrix)
	var first, last time.Time
	seen := map[string]bool{}
	var devs []device
	for _, ss := range m {
		for _, p := range ss.Values {
			if p.Value <= 0 {
				continue
			}
			t := p.Timestamp.Time()
			if first.IsZero() || t.Before(first) {
				first = t
			}
			if t.After(last) {
				last = t
			}
		}
		k := deviceKey(ss.Metric)
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		devs = append(devs, device{key: k, uuid: string(ss.Metric[schema.LabelUUID]), gi: string(ss.Metric[schema.LabelGIID]),
			index: string(ss.Metric[schema.LabelGPU]), model: string(ss.Metric[schema.LabelModelName]),
			prof: string(ss.Metric[schema.LabelGIProfile]), host: features.Host(ss.Metric)})
	}
	if first.IsZero() || len(devs) == 0 {
		return time.Time{}, time.Time{}, nil, fmt.Errorf("%w in the last %s (is it older than the retention, or not a GPU job?)", ErrNoData, model.Duration(o.Lookback))
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].key < devs[j].key })
	fb0, b0, err := narrow(ctx, o.Querier, fb, first, bucket, false)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	fb1, b1, err := narrow(ctx, o.Querier, fb, last, bucket, true)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	ts := "timestamp(" + fb + ")"
	lo, err := extreme(ctx, o.Querier, "min("+ts+")", fb0.Add(-b0), fb0, false)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	hi, err := extreme(ctx, o.Querier, "max("+ts+")", fb1.Add(-b1), fb1, true)
	if err != nil {
		return time.Time{}, time.Time{}, nil, err
	}
	if lo.IsZero() || hi.IsZero() || hi.Before(lo) {
		return time.Time{}, time.Time{}, nil, fmt.Errorf("%w: its samples could not be placed in time", ErrNoData)
	}
	return lo, hi, devs, nil
}

// narrowBy is how many finer buckets one bucket is split into per pass.
const narrowBy = 60

// narrow splits the bucket (t-b, t] into finer ones until they are at most
// a minute long, keeping the first (or last) that holds samples of expr.
func narrow(ctx context.Context, q query.Querier, expr string, t time.Time, b time.Duration, last bool) (time.Time, time.Duration, error) {
	for b > narrowBy*time.Second {
		s := ((b + narrowBy - 1) / narrowBy).Round(time.Second)
		k := int((b + s - 1) / s)
		v, err := q.QueryRange(ctx, fmt.Sprintf("sum(count_over_time(%s[%s]))", expr, rangeOf(s-time.Millisecond)),
			query.Range{Start: t.Add(-time.Duration(k-1) * s), End: t, Step: s})
		if err != nil {
			return time.Time{}, 0, err
		}
		m, _ := v.(model.Matrix)
		var found time.Time
		for _, ss := range m {
			for _, p := range ss.Values {
				at := p.Timestamp.Time()
				if p.Value > 0 && (found.IsZero() || (last && at.After(found)) || (!last && at.Before(found))) {
					found = at
				}
			}
		}
		if found.IsZero() {
			return t, b, nil // cannot happen with the data unchanged: keep the coarse bucket
		}
		t, b = found, s
	}
	return t, b, nil
}

// extreme returns the least (or greatest) value of a timestamp() range
// query over (from, to] at one-second steps: the first (last) sample.
func extreme(ctx context.Context, q query.Querier, expr string, from, to time.Time, greatest bool) (time.Time, error) {
	v, err := q.QueryRange(ctx, expr, query.Range{Start: from.Add(time.Second), End: to, Step: time.Second})
	if err != nil {
		return time.Time{}, err
	}
	m, _ := v.(model.Matrix)
	best := math.NaN()
	for _, ss := range m {
		for _, p := range ss.Values {
			x := float64(p.Value)
			if x <= float64(from.Unix()) {
				continue // a sample before the bucket, seen through the lookback delta
			}
			if math.IsNaN(best) || (greatest && x > best) || (!greatest && x < best) {
				best = x
			}
		}
	}
	if math.IsNaN(best) {
		return time.Time{}, nil
	}
	return time.UnixMilli(int64(math.Round(best * 1000))).UTC(), nil
}

func rangeOf(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

// Exprs returns the instant queries of the per-GPU figures over a window
// of length w (run at the window's end), by name. Tests and docs read them.
func Exprs(ref Ref, w time.Duration) map[string]string {
	sel, r := ref.Selector(), "["+rangeOf(w)+"]"
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	o := func(agg, fn string, m *schema.Metric) string {
		return agg + by + "(" + fn + "(" + m.Name + sel + r + "))"
	}
	return map[string]string{
		"samples":     o("sum", "count_over_time", schema.FBUsed),
		"util_mean":   o("avg", "avg_over_time", schema.GPUUtil),
		"util_peak":   o("max", "max_over_time", schema.GPUUtil),
		"sm_mean":     o("avg", "avg_over_time", schema.ProfSMActive),
		"sm_peak":     o("max", "max_over_time", schema.ProfSMActive),
		"mem_peak":    o("max", "max_over_time", schema.FBUsed),
		"mem_free":    o("min", "min_over_time", schema.FBFree),
		"power_mean":  o("avg", "avg_over_time", schema.PowerUsage),
		"energy_mj":   o("sum", "increase", schema.TotalEnergy),
		"cpu_seconds": "sum(increase(" + schema.JobCPUSeconds.Name + ref.JobSelector() + r + "))",
		"holder":      "max by (" + strings.Join([]string{schema.LabelUser, schema.LabelTeam, schema.LabelKind, schema.LabelAccount, schema.LabelJobName, schema.LabelScheduler}, ", ") + ") (max_over_time(" + schema.AllocationInfo.Name + ref.JobSelector() + r + "))",
	}
}

// instant runs the named queries side by side at t.
func instant(ctx context.Context, q query.Querier, exprs map[string]string, t time.Time) (map[string]model.Vector, error) {
	out := map[string]model.Vector{}
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(parallel)
	var errs []error
	for name, expr := range exprs {
		g.Go(func() error {
			v, err := q.Query(ctx, expr, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				// Every failed query is named: the view says which
				// figures it lacks.
				errs = append(errs, err)
				return nil
			}
			vec, _ := v.(model.Vector)
			out[name] = vec
			return nil
		})
	}
	_ = g.Wait() // the queries' errors are joined below
	return out, errors.Join(errs...)
}

func byDevice(v model.Vector) map[string]float64 {
	out := map[string]float64{}
	for _, s := range v {
		x := float64(s.Value)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			continue
		}
		out[deviceKey(s.Metric)] = x
	}
	return out
}

func ptr(m map[string]float64, k string) *float64 {
	if v, ok := m[k]; ok {
		return &v
	}
	return nil
}

func figures(ctx context.Context, o Options, ref Ref, r *Report, devs []device, w time.Duration) error {
	res, err := instant(ctx, o.Querier, Exprs(ref, w), r.End)
	if err != nil {
		return err
	}
	get := func(name string) map[string]float64 { return byDevice(res[name]) }
	samples, um, up, sm, sp := get("samples"), get("util_mean"), get("util_peak"), get("sm_mean"), get("sm_peak")
	mp, mf, pm, en := get("mem_peak"), get("mem_free"), get("power_mean"), get("energy_mj")
	models := map[string]bool{}
	for _, d := range devs {
		if r.Hostname == "" {
			r.Hostname = d.host
		}
		g := GPU{Device: d.key, UUID: d.uuid, Index: d.index, Model: d.model, MIGProfile: d.prof,
			Samples: int(samples[d.key]), UtilMean: ptr(um, d.key), UtilPeak: ptr(up, d.key),
			SMActiveMean: ptr(sm, d.key), SMActivePeak: ptr(sp, d.key), MemPeakMiB: ptr(mp, d.key), PowerMeanW: ptr(pm, d.key)}
		if g.MemPeakMiB != nil {
			if free, ok := mf[d.key]; ok {
				total := *g.MemPeakMiB + free
				g.MemTotalMiB = &total
				if total > 0 {
					share := *g.MemPeakMiB / total
					g.MemPeakShare = &share
				}
			}
		}
		if e, ok := en[d.key]; ok {
			kwh := e / mJPerKWh
			g.EnergyKWh, g.EnergyFrom = &kwh, "counter"
		} else if g.PowerMeanW != nil {
			kwh := *g.PowerMeanW * r.DurationHours / 1000
			g.EnergyKWh, g.EnergyFrom = &kwh, "power"
		}
		if d.model != "" && !models[d.model] {
			models[d.model] = true
			r.Models = append(r.Models, d.model)
		}
		r.GPUs = append(r.GPUs, g)
	}
	if v := res["cpu_seconds"]; len(v) > 0 && !math.IsNaN(float64(v[0].Value)) {
		c := &CPU{Seconds: float64(v[0].Value)}
		if s := r.End.Sub(r.Start).Seconds(); s > 0 {
			c.MeanCores = c.Seconds / s
		}
		r.CPU = c
	}
	if v := res["holder"]; len(v) > 0 {
		m := v[0].Metric
		r.User, r.Account, r.JobName = string(m[schema.LabelUser]), string(m[schema.LabelAccount]), string(m[schema.LabelJobName])
		r.Kind = string(m[schema.LabelKind])
		if t := string(m[schema.LabelTeam]); t != "" {
			r.Team = t
		}
		if s := string(m[schema.LabelScheduler]); s != "" {
			r.Scheduler = s
		}
	}
	return nil
}

// sparklines reads per-interval util and memory, then each GPU's coverage.
func sparklines(ctx context.Context, o Options, sel string, r *Report) error {
	span := r.End.Sub(r.Start)
	step := max((span / time.Duration(o.Points)).Truncate(time.Second), time.Second)
	n := int(span / step)
	if n < 1 {
		return nil
	}
	rg := query.Range{Start: r.End.Add(-time.Duration(n-1) * step), End: r.End, Step: step}
	win := "[" + rangeOf(step-time.Millisecond) + "]"
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	exprs := []string{
		"avg" + by + "(avg_over_time(" + schema.GPUUtil.Name + sel + win + "))",
		"max" + by + "(max_over_time(" + schema.FBUsed.Name + sel + win + "))",
	}
	ms := make([]map[string][]*float64, len(exprs))
	errs := make([]error, len(exprs))
	var wg sync.WaitGroup
	for i, e := range exprs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := o.Querier.QueryRange(ctx, e, rg)
			if err != nil {
				errs[i] = err
				return
			}
			m, _ := v.(model.Matrix)
			ms[i] = series(m, rg, n)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range r.GPUs {
		g := &r.GPUs[i]
		g.SparkUtil, g.SparkMem, g.SparkStep = ms[0][g.Device], ms[1][g.Device], model.Duration(step).String()
	}
	return coverage(ctx, o, sel, r)
}

// maxCoveragePoints bounds the buckets coverage is counted in, so that a
// month-long job stays one cheap range query.
const maxCoveragePoints = 2000

// coverage sets each GPU's share of the job's span that its samples cover,
// judged against its own scrape interval, learnt from its samples: the
// span is cut into buckets of at least four of the GPU's mean sample
// spacings, a bucket holding the count most buckets hold is full, and one
// holding fewer is that much short (one sample short is scrape jitter, as
// features.FullShare says, not a gap). A job scraped every 15 s without a gap
// is fully covered however short its span, and one whose exporter was down
// for half of it is half covered; a target scraped every 60 s is judged by
// its own cadence, not by the fastest one's.
func coverage(ctx context.Context, o Options, sel string, r *Report) error {
	span := r.End.Sub(r.Start)
	var spacing time.Duration
	for _, g := range r.GPUs {
		if g.Samples > 1 {
			spacing = max(spacing, span/time.Duration(g.Samples-1))
		}
	}
	b := max(4*spacing, span/maxCoveragePoints, time.Second).Truncate(time.Millisecond)
	n := int(span / b)
	if spacing == 0 || n < 2 {
		// Too few samples or too short a span to show a gap: nothing is
		// known to be missing (finish says when it is too little to judge).
		for i := range r.GPUs {
			if r.GPUs[i].Samples > 0 {
				r.GPUs[i].Coverage = 1
			}
		}
		return nil
	}
	rg := query.Range{Start: r.End.Add(-time.Duration(n-1) * b), End: r.End, Step: b}
	by := " by (" + schema.LabelUUID + ", " + schema.LabelGIID + ") "
	v, err := o.Querier.QueryRange(ctx, "sum"+by+"(count_over_time("+schema.FBUsed.Name+sel+"["+rangeOf(b-time.Millisecond)+"]))", rg)
	if err != nil {
		return err
	}
	m, _ := v.(model.Matrix)
	counts := series(m, rg, n)
	for i := range r.GPUs {
		g := &r.GPUs[i]
		var seen []float64
		for _, p := range counts[g.Device] {
			if p != nil && *p > 0 {
				seen = append(seen, *p)
			}
		}
		full := features.ModeCount(seen)
		if full <= 0 {
			continue
		}
		var got float64
		for _, p := range counts[g.Device] {
			if p != nil {
				got += features.FullShare(*p, full)
			}
		}
		g.Coverage = got / float64(n)
	}
	return nil
}

// series lays each device's points on the n steps of rg (nil: no value).
func series(m model.Matrix, rg query.Range, n int) map[string][]*float64 {
	out := map[string][]*float64{}
	for _, ss := range m {
		pts := make([]*float64, n)
		for _, p := range ss.Values {
			i := int(p.Timestamp.Time().Sub(rg.Start) / rg.Step)
			if i < 0 || i >= n {
				continue
			}
			x := float64(p.Value)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				continue
			}
			pts[i] = &x
		}
		out[deviceKey(ss.Metric)] = pts
	}
	return out
}

// maxSteps bounds the analysis steps of one job view (35 days at 5m).
const maxSteps = 10080

// findings runs the analyzer's engine over the job's devices in its window
// and keeps the findings on the job.
func findings(ctx context.Context, o Options, ref Ref, start, end time.Time, devs []device) ([]Finding, error) {
	uuids := make([]string, 0, len(devs))
	for _, d := range devs {
		uuids = append(uuids, d.uuid)
	}
	sq, err := newScoped(o.Querier, uuids)
	if err != nil {
		return nil, err
	}
	step := o.Config.Step.D()
	// Steps are (end-step, end]: the first one must hold the first sample,
	// and one more after the last sample lets the detectors see the end.
	from := start.Add(-time.Millisecond).Truncate(step)
	to := end.Add(-time.Millisecond).Truncate(step).Add(2 * step)
	if now := o.Now.Truncate(step); to.After(now) && now.After(from) {
		to = now
	}
	if n := int(to.Sub(from) / step); n > maxSteps {
		from = to.Add(-maxSteps * step)
	}
	e, err := engine.New(engine.Options{Querier: sq, Config: o.Config, ChunkSteps: maxSteps})
	if err != nil {
		return nil, err
	}
	all, err := e.Analyze(ctx, from, to)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, f := range all {
		if f.Job != ref.String() {
			continue
		}
		jf := Finding{Finding: f, Detail: f.Advice}
		jf.Advice = report.Advise(&f)
		out = append(out, jf)
	}
	return out, nil
}

// finish fills the totals, the state and the verdict on coverage.
func (r *Report) finish(o Options) {
	r.Coverage = 1
	var samples int
	for _, g := range r.GPUs {
		r.Coverage = math.Min(r.Coverage, g.Coverage)
		samples = max(samples, g.Samples)
		if g.EnergyKWh != nil {
			r.Totals.EnergyKWh += *g.EnergyKWh
		}
	}
	r.Totals.GPUHours = float64(len(r.GPUs)) * r.DurationHours
	for _, f := range r.Findings {
		r.Totals.WastedGPUHours += f.WastedGPUHours
		r.Totals.DegradedGPUHours += f.Evidence[schema.EvidenceDegraded]
		if f.Pattern == schema.GPUFault && f.Evidence["ended_by_fault"] > 0 {
			if r.Health == nil {
				r.Health = &Health{}
			}
			r.Health.EndedByFault = report.Advise(&f.Finding)
		}
	}
	switch {
	case samples < 3:
		r.NotEnoughData = fmt.Sprintf("only %d sample(s) per GPU: the job was too short to judge", samples)
	case r.Coverage < float64(o.Config.MinCoverage):
		r.NotEnoughData = fmt.Sprintf("samples cover only %.0f%% of the job's span (at least %.0f%% needed): the exporter or the scrapes had gaps",
			100*r.Coverage, 100*float64(o.Config.MinCoverage))
	}
	// A job whose newest sample is older than a few analysis steps ended
	// (or its exporter went away, which the scheduler's state settles).
	r.State = "running"
	if o.Now.Sub(r.End) > 2*o.Config.Step.D() {
		r.State = "ended"
	}
	if s := o.Scheduler; s != nil {
		if s.State != "" {
			r.State = strings.ToLower(s.State)
		}
		if s.User != "" {
			r.User = s.User
		}
		if s.Account != "" {
			r.Account = s.Account
		}
		if s.Name != "" {
			r.JobName = s.Name
		}
		if s.CPUs > 0 && r.CPU != nil {
			r.CPU.Allocated = s.CPUs
			eff := r.CPU.MeanCores / float64(s.CPUs)
			r.CPU.Efficiency = &eff
		}
	}
}
