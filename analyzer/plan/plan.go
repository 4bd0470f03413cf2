// Package plan is the capacity planner: from the demand each allocation
// put on its GPUs over a window (package demand) it proposes the MIG slice
// or smaller GPU model that would do, packs the allocations of each node
// pool onto the fewest GPUs (package pack: MIG layouts the hardware accepts,
// package mig, or time-slicing for work whose peaks do not coincide),
// shows when capacity sits idle by hour of week, forecasts each pool's
// demand a week ahead (package forecast) and sums it all per team.
//
// Every figure carries its window and coverage. An allocation whose demand
// is unknown (too few samples, no compute or memory series) keeps its GPUs:
// it is counted as needed and never as freeable.
package plan

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gpuwatch/gpuwatch/analyzer/accounting"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/demand"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/mig"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pack"
	"github.com/gpuwatch/gpuwatch/analyzer/plan/pools"
	"github.com/gpuwatch/gpuwatch/analyzer/query"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Options tune the plan. Zero values take the defaults.
type Options struct {
	// Books gives the accounting of the plan's window, for the team view's
	// GPU-hours; nil leaves them out (the planner judges no waste itself).
	Books BookSource
	// ComputeHeadroom multiplies compute p95 when sizing a slice (1.2).
	ComputeHeadroom float64
	// MemoryHeadroom multiplies peak memory when sizing (1.1).
	MemoryHeadroom float64
	// TargetLoad is the share of a time-sliced GPU the summed hourly
	// compute may fill (0.9: p95 of SM activity, or mean util on util-only
	// data), and the share of its memory the summed peaks may.
	TargetLoad float64
	// MinSamples below which an allocation's demand is unknown (10).
	MinSamples float64
	// IdleCompute is the hourly p95 compute at or below which an allocated
	// GPU counts as idle capacity in that hour of the heat map (0.05).
	IdleCompute float64
	// NoActivity is the highest compute at or below which an allocation
	// did no work (0.005, the noise of an idle GPU's readings). An
	// allocation is idle only when it did no work and its memory never
	// changed; a light service is sized, not called idle.
	NoActivity float64
	// Location of the hour-of-week figures (UTC).
	Location *time.Location
	// PoolLabel, HostMap and Hosts say where pools come from (package
	// pools): a series label, a host map, facts. Without any, a pool is
	// the GPU model and the node group read from the host name.
	PoolLabel string
	HostMap   pools.Map
	Hosts     pools.Hosts
	// IsolationMargin is how many GPUs more than time-slicing a pool's MIG
	// answer may cost and still be chosen, for its isolation (0).
	IsolationMargin int
	// TimeSliceAcrossUsers lets time-slicing put different owners' work
	// on one GPU (false: each owner's work is time-sliced only with that
	// owner's own; the owner is the user, else the team or the Kubernetes
	// namespace where the data names no user, and work of none is alone).
	// Tenants of a time-sliced GPU share its memory and its faults; MIG
	// isolates them.
	TimeSliceAcrossUsers bool
	// Rules: whether to read the planner's recording rules (see
	// demand.Rules; default auto).
	Rules demand.Rules
	// MinHistory is the least history (whole clock hours from the first
	// that holds a sample to the window's end) that Build plans on (24 h: the packing bets that hourly
	// peaks do not coincide, which a day's cycle must have shown). Below
	// it Build returns a *ShortHistoryError instead of a plan.
	MinHistory time.Duration
}

func (o *Options) defaults() {
	if o.ComputeHeadroom == 0 {
		o.ComputeHeadroom = 1.2
	}
	if o.MemoryHeadroom == 0 {
		o.MemoryHeadroom = 1.1
	}
	if o.TargetLoad == 0 {
		o.TargetLoad = 0.9
	}
	if o.MinSamples == 0 {
		o.MinSamples = 10
	}
	if o.IdleCompute == 0 {
		o.IdleCompute = 0.05
	}
	if o.NoActivity == 0 {
		o.NoActivity = 0.005
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.MinHistory == 0 {
		o.MinHistory = DefaultMinHistory
	}
}

// DefaultMinHistory is Options.MinHistory's default.
const DefaultMinHistory = 24 * time.Hour

// Recommendation kinds for one allocation.
const (
	RecMIG     = "mig"       // a MIG slice would do
	RecSmaller = "smaller"   // a smaller GPU model would do
	RecShare   = "share"     // shares a GPU by time-slicing
	RecWhole   = "whole_gpu" // needs the whole GPU
	RecUnknown = "unknown"   // demand unknown: keeps its GPUs
	RecIdle    = "idle"      // held but never used: no work, memory unchanged
)

// Allocation is one job's demand and what would do for it.
type Allocation struct {
	Pool    string  `json:"pool"`
	Host    string  `json:"host"`
	Job     string  `json:"job"`
	Team    string  `json:"team,omitempty"`
	User    string  `json:"user,omitempty"`
	Kind    string  `json:"kind,omitempty"`
	GPUs    int     `json:"gpus"`
	Samples float64 `json:"samples"`
	// Compute (fraction of a GPU) and Memory (MiB) per GPU: the highest
	// over the job's GPUs.
	Compute        demand.Stats `json:"compute"`
	Memory         demand.Stats `json:"memory_mib"`
	Recommendation string       `json:"recommendation"`
	Profile        string       `json:"mig_profile,omitempty"`
	SmallerModel   string       `json:"smaller_model,omitempty"`
	HourOfWeek     []float64    `json:"hour_of_week_p95,omitempty"`
}

// GPU is one GPU of a proposed pool layout.
type GPU struct {
	// Mode is "mig" (Layout holds the instances) or "time_slice".
	Mode string `json:"mode"`
	// Jobs are the jobs placed on the GPU, as the job view names them
	// (a Slurm id, namespace/pod); Devices, in the same order, the GPU
	// each of them holds now (host/UUID).
	Jobs    []string       `json:"jobs"`
	Devices []string       `json:"devices"`
	Layout  []mig.Instance `json:"layout,omitempty"`
	// Isolation is what the GPU's tenants share: IsolatedMIG or
	// SharedTimeSlice (or Alone, one job on a time-sliced GPU).
	Isolation string `json:"isolation"`
	// P95Load is the highest hourly sum of the co-located p95 compute.
	P95Load float64 `json:"p95_load"`
	// ContendedHours counts hours whose summed peaks exceed the GPU.
	ContendedHours int `json:"contended_hours"`
}

// What a layout GPU's tenants share (GPU.Isolation).
const (
	IsolatedMIG     = "MIG: memory and faults isolated per instance"
	SharedTimeSlice = "time-sliced: memory and faults shared by its jobs"
	Alone           = "time-sliced, one job: nothing shared"
)

// Pool is the plan of one node pool (model + node group).
type Pool struct {
	Name  string `json:"name"`
	Model string `json:"model"`
	// GPUs seen in the window, held by an allocation at some time, held by
	// allocations of unknown demand, needed by the plan, and freeable
	// (held - needed, never counting unknown ones).
	Seen     int     `json:"gpus_seen"`
	Held     int     `json:"gpus_held"`
	Unknown  int     `json:"gpus_unknown"`
	Needed   int     `json:"gpus_needed"`
	Freeable int     `json:"gpus_freeable"`
	Coverage float64 `json:"coverage"`
	// Strategy is how the known demand is packed: mig, time_slice.
	Strategy string `json:"strategy"`
	// TimeSliceGPUs and MIGGPUs are what each strategy needs for the
	// known demand (MIG: slices plus time-slicing for what fits no slice).
	TimeSliceGPUs int `json:"time_slice_gpus"`
	MIGGPUs       int `json:"mig_gpus,omitempty"`
	// StrandedSlices are the compute slices the MIG answer leaves unused;
	// Tradeoff says what each answer gives up and why the plan chose.
	StrandedSlices int    `json:"mig_stranded_slices,omitempty"`
	Tradeoff       string `json:"tradeoff,omitempty"`
	Layout         []GPU  `json:"layout"`
	// TimeSliceLayout is the time-slicing answer's layout where the plan
	// chose MIG, so that both answers can be weighed side by side.
	TimeSliceLayout []GPU `json:"time_slice_layout,omitempty"`
	// Contention: the highest P95Load of the layout's GPUs.
	Contention float64   `json:"p95_contention"`
	Heat       *HeatMap  `json:"heat_map,omitempty"`
	Forecast   *Forecast `json:"forecast,omitempty"`
}

// BookSource gives the accounting of a window (accounting.Books over the
// analyzer's store).
type BookSource interface {
	Book(ctx context.Context, from, to time.Time) (*accounting.Book, error)
}

// Team is one team's pooling view.
type Team struct {
	Team string `json:"team"`
	// GPUHours is the team's accounting of the window
	// (analyzer/accounting, from the analyzer's records: the same figures
	// as the reports and the web page); nil where the planner was given no
	// records (Options.Books), as `gpuwatch plan` against a Prometheus.
	GPUHours *accounting.Totals `json:"gpu_hours,omitempty"`
	// SharedGPUHours is the part of GPUHours the team held as shares of
	// shared GPUs (time-slicing, MPS, HAMi quotas): the shares reserved
	// (allocated) and what its holders used of them, each judged on its
	// own use; nil where it held none, or without records.
	SharedGPUHours *accounting.Totals `json:"shared_gpu_hours,omitempty"`
	// GPUs held at some time, and needed when the team's work is packed
	// on its own per pool.
	Held     int `json:"gpus_held"`
	Needed   int `json:"gpus_needed"`
	Freeable int `json:"gpus_freeable"`
}

// Plan is the planner's answer for one window.
type Plan struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Hours    int       `json:"hours"`
	Coverage float64   `json:"coverage"`
	// HistoryHours is how far back in the window the data reaches: the
	// hours from the first that holds a sample to the end.
	HistoryHours int `json:"history_hours"`
	// Totals over the pools.
	Seen     int `json:"gpus_seen"`
	Held     int `json:"gpus_held"`
	Unknown  int `json:"gpus_unknown"`
	Needed   int `json:"gpus_needed"`
	Freeable int `json:"gpus_freeable"`
	// UnallocatedGPUHours is the fleet's capacity no allocation held.
	UnallocatedGPUHours float64      `json:"unallocated_gpu_hours"`
	Pools               []Pool       `json:"pools"`
	Teams               []Team       `json:"teams"`
	Allocations         []Allocation `json:"allocations"`
	Queries             int          `json:"queries"`
	// Read is where the hourly figures came from ("recording rules" or
	// "raw series"), ReadReason why.
	Read       string `json:"read"`
	ReadReason string `json:"read_reason,omitempty"`
	// PoolsBy says how the pools were named.
	PoolsBy []string `json:"pools_by"`
}

// The number of queries Build issues, whatever the fleet size and the
// window: from raw series, from the recording rules, and the probes of the
// recording rules before either (unless they are not asked for).
const (
	QueriesRaw      = demand.QueriesRaw
	QueriesRecorded = demand.QueriesRecorded
	Probes          = demand.Probes
)

// Build reads the demand over [from, to) and plans it.
func Build(ctx context.Context, q query.Querier, from, to time.Time, o Options) (*Plan, error) {
	o.defaults()
	res, err := demand.Fetch(ctx, q, from, to, demand.Options{Pools: pools.Options{Label: o.PoolLabel, Map: o.HostMap, Hosts: o.Hosts}, Rules: o.Rules})
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if err := o.enoughHistory(res); err != nil {
		return nil, err
	}
	p := FromDemand(res, o)
	if o.Books != nil {
		book, err := o.Books.Book(ctx, from, to)
		if err != nil {
			return nil, fmt.Errorf("plan: the window's accounting: %w", err)
		}
		p.account(book)
	}
	return p, nil
}

// account gives each team of the plan its GPU-hours from book, and adds
// the teams the book knows that held no GPU the plan saw.
func (p *Plan) account(book *accounting.Book) {
	byTeam := map[string]accounting.Totals{}
	for name, t := range book.Teams() {
		if name == "" {
			name = NoTeam
		}
		byTeam[name] = t
	}
	for i := range p.Teams {
		t := byTeam[p.Teams[i].Team]
		p.Teams[i].GPUHours = &t
		delete(byTeam, p.Teams[i].Team)
	}
	for name, t := range byTeam {
		p.Teams = append(p.Teams, Team{Team: name, GPUHours: &t})
	}
	shared := book.SharedTeams()
	for i := range p.Teams {
		name := p.Teams[i].Team
		if name == NoTeam {
			name = ""
		}
		if t, ok := shared[name]; ok {
			p.Teams[i].SharedGPUHours = &t
		}
	}
	sort.Slice(p.Teams, func(a, b int) bool { return p.Teams[a].Team < p.Teams[b].Team })
}

// known reports whether an allocated item's demand can be planned on.
func (o *Options) known(it *demand.Item) bool {
	return it.HasCompute && it.HasMemory && it.Samples >= o.MinSamples && it.TotalMiB > 0
}

// FromDemand plans what Fetch read.
func FromDemand(res *demand.Result, o Options) *Plan {
	o.defaults()
	p := &Plan{From: res.From, To: res.To, Hours: res.Hours, Coverage: res.Coverage(), HistoryHours: res.HistoryHours,
		Read: string(res.Read), ReadReason: res.Reason, Queries: res.Queries, PoolsBy: res.PoolsBy}
	byPool := map[string][]*demand.Item{}
	for i := range res.Items {
		it := &res.Items[i]
		byPool[it.Pool] = append(byPool[it.Pool], it)
	}
	names := make([]string, 0, len(byPool))
	for n := range byPool {
		names = append(names, n)
	}
	sort.Strings(names)
	// Pools, teams and allocations are figured independently of each
	// other (each only reads the items): they run on every core, and the
	// figures are joined in name order.
	pools := make([]Pool, len(names))
	var teams []Team
	g := new(errgroup.Group)
	// The teams and allocations beside as many pools as there are cores.
	g.SetLimit(runtime.GOMAXPROCS(0) + 2)
	g.Go(func() error { teams = o.teams(byPool); return nil })
	g.Go(func() error { p.Allocations = o.allocations(res); return nil })
	for i, n := range names {
		g.Go(func() error { pools[i] = o.pool(n, byPool[n], res); return nil })
	}
	_ = g.Wait()
	for _, pl := range pools {
		p.Pools = append(p.Pools, pl)
		p.Seen += pl.Seen
		p.Held += pl.Held
		p.Unknown += pl.Unknown
		p.Needed += pl.Needed
		p.Freeable += pl.Freeable
	}
	for i := range res.Items {
		it := &res.Items[i]
		if it.Job == "" {
			p.UnallocatedGPUHours += presentHours(it)
		}
	}
	p.Teams = teams
	return p
}

func presentHours(it *demand.Item) float64 {
	n := 0.0
	for h := range it.HourSamples {
		if it.Present(h) {
			n++
		}
	}
	return n
}

// gpuKey is the physical GPU of an item (a MIG instance's parent).
func gpuKey(it *demand.Item) string { return it.Host + "|" + it.UUID }

// owner is whose work an item is, for time-slicing: its user; where the
// data names none (stock dcgm-exporter series, without gpuwatch's
// allocation info), its team, else its Kubernetes namespace (gpuwatch's
// team for a pod); else "", an owner of its own.
func owner(it *demand.Item) string {
	switch {
	case it.User != "":
		return "user " + it.User
	case it.Team != "":
		return "team " + it.Team
	}
	if ns, _, ok := strings.Cut(it.Job, "/"); ok && ns != "" {
		return "namespace " + ns
	}
	return ""
}

// sized is the demand a pack sizes for: per hour, the p95 of SM activity
// (a share of the SMs, which co-located work needs at the same time), or
// on util-only data the mean util (a share of time, which time-sliced work
// takes in turns: the hour's busy times add up); peak memory with headroom.
func (o *Options) sized(it *demand.Item, g *mig.Model) pack.Demand {
	n := len(it.HourP95)
	d := pack.Demand{ID: it.Key(), Compute: make([]float64, n), Peak: make([]float64, n), Present: make([]bool, n),
		Memory: it.Memory.Peak * o.MemoryHeadroom, Owner: owner(it)}
	hourly := it.HourP95
	if it.TimeShare {
		hourly = it.HourMean
	}
	for h := 0; h < n; h++ {
		d.Present[h] = it.Present(h)
		if !d.Present[h] {
			continue
		}
		if x := float64(hourly[h]); !math.IsNaN(x) {
			d.Compute[h] = x
		} else {
			d.Compute[h] = it.Compute.P95
		}
		if x := float64(it.HourPeak[h]); !math.IsNaN(x) {
			d.Peak[h] = x
		}
	}
	if g != nil {
		if pr, ok := g.Fit(it.Compute.P95*o.ComputeHeadroom, it.Memory.Peak*o.MemoryHeadroom); ok {
			d.Profile = pr.Name
		}
	}
	return d
}

func (o *Options) pool(name string, items []*demand.Item, res *demand.Result) Pool {
	pl := Pool{Name: name}
	// The heat map and the forecast read the items alone: they are worked
	// out beside the packing.
	var heat *HeatMap
	var fc *Forecast
	done := make(chan struct{})
	go func() {
		defer close(done)
		heat, fc = o.heat(items, res), o.forecast(items, res)
	}()
	seen, known := o.census(&pl, items)
	pl.Coverage = coverage(seen, res)
	g, hasMIG := mig.Lookup(pl.Model)
	if !hasMIG {
		g = nil
	}
	ds := make([]pack.Demand, len(known))
	var memTotal float64
	for i, it := range known {
		ds[i] = o.sized(it, g)
		memTotal = max(memTotal, it.TotalMiB)
	}
	capa := pack.Capacity{Compute: o.TargetLoad, Memory: memTotal * o.TargetLoad}
	if memTotal == 0 {
		capa.Memory = 1
	}
	ts := o.timeSlice(ds, capa)
	pl.TimeSliceGPUs = len(ts)
	layout := o.timeSliceGPUs(ts, ds, nil)
	pl.Strategy = "time_slice"
	if g != nil {
		layout = o.weighMIG(&pl, g, known, ds, capa, layout)
	}
	pl.Layout = layout
	for _, gp := range layout {
		pl.Contention = max(pl.Contention, gp.P95Load)
	}
	// The GPUs held are a packing too: a plan never needs more.
	pl.Needed = min(pl.Held, len(layout)+pl.Unknown)
	pl.Freeable = pl.Held - pl.Needed
	<-done
	pl.Heat, pl.Forecast = heat, fc
	return pl
}

// census sets the pool's model and its counts of GPUs seen, held by a job
// and held with a demand not known, and returns the GPUs seen and the
// items whose demand is known.
func (o *Options) census(pl *Pool, items []*demand.Item) (seen map[string]bool, known []*demand.Item) {
	seen, held, unknown := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, it := range items {
		pl.Model = it.Model
		k := gpuKey(it)
		if !seen[k] {
			seen[k] = true
		}
		if it.Job == "" {
			continue
		}
		held[k] = true
		if o.known(it) {
			known = append(known, it)
		} else {
			unknown[k] = true
		}
	}
	pl.Seen, pl.Held, pl.Unknown = len(seen), len(held), len(unknown)
	return seen, known
}

// coverage is the share of the expected samples of the GPUs seen that
// came; 0 when none were expected.
func coverage(seen map[string]bool, res *demand.Result) float64 {
	var got, want float64
	for d, n := range res.DeviceSamples {
		// Device keys are host|device; a MIG instance's device is
		// UUID/GI, on the GPU host|UUID.
		k := d
		if host, dev, ok := strings.Cut(d, "|"); ok {
			uuid, _, _ := strings.Cut(dev, "/")
			k = host + "|" + uuid
		}
		if seen[k] {
			got += math.Min(n, res.Expected)
			want += res.Expected
		}
	}
	if want > 0 {
		return got / want
	}
	return 0
}

// weighMIG packs the pool's demands into MIG slices on model g, sets the
// pool's MIG figures and trade-off, and returns the MIG layout where the
// rule picks MIG, else the time-sliced layout it was given.
func (o *Options) weighMIG(pl *Pool, g *mig.Model, known []*demand.Item, ds []pack.Demand, capa pack.Capacity, layout []GPU) []GPU {
	mb, rest := pack.MIG(ds, g)
	restDs := make([]pack.Demand, len(rest))
	for i, k := range rest {
		restDs[i] = ds[k]
	}
	rts := o.timeSlice(restDs, capa)
	pl.MIGGPUs = len(mb) + len(rts)
	for _, b := range mb {
		used := 0
		for _, in := range b.Layout {
			if pr, ok := g.Profile(in.Profile); ok {
				used += pr.Compute
			}
		}
		pl.StrandedSlices += g.ComputeSlices - used
	}
	interactive := len(known) > 0
	for _, it := range known {
		interactive = interactive && it.Kind == schema.KindInteractive
	}
	// The rule: MIG when it costs at most IsolationMargin GPUs more than
	// sharing (isolation is worth that much); a pool of interactive
	// sessions, whose memory no history predicts, takes MIG whenever
	// every session has a valid slice.
	useMIG := len(mb) > 0 && (pl.MIGGPUs <= pl.TimeSliceGPUs+o.IsolationMargin || interactive && len(rest) == 0)
	if useMIG {
		pl.Strategy = "mig"
		var migGPUs []GPU
		for _, b := range mb {
			gp := GPU{Mode: "mig", Layout: b.Layout, Isolation: IsolatedMIG}
			for _, i := range b.Items {
				gp.place(ds[i].ID)
			}
			migGPUs = append(migGPUs, gp)
		}
		pl.TimeSliceLayout, layout = layout, append(migGPUs, o.timeSliceGPUs(rts, restDs, nil)...)
	}
	pl.Tradeoff = fmt.Sprintf("time-slicing: %d GPUs, %s, tenants share memory and faults (one out-of-memory or Xid error reaches all); "+
		"MIG: %d GPUs, memory and faults isolated, %d compute slices stranded", pl.TimeSliceGPUs, o.sharingScope(), pl.MIGGPUs, pl.StrandedSlices)
	pl.Tradeoff += "; " + slicingChoice(useMIG, interactive, len(mb) > 0, pl.MIGGPUs, pl.TimeSliceGPUs, o.IsolationMargin)
	return layout
}

// slicingChoice says which answer the pool takes and why: MIG for
// interactive sessions, MIG at no or few GPUs more than time-slicing, or
// time-slicing because no allocation fits a slice or MIG needs more GPUs
// than the isolation margin allows.
func slicingChoice(useMIG, interactive, anySlice bool, migGPUs, tsGPUs, margin int) string {
	switch {
	case useMIG && interactive && migGPUs > tsGPUs+margin:
		return "MIG for interactive sessions, whose memory no history predicts"
	case useMIG && migGPUs <= tsGPUs:
		return "MIG: no more GPUs than time-slicing"
	case useMIG:
		return fmt.Sprintf("MIG: %s more than time-slicing, within the isolation margin of %s",
			plural(migGPUs-tsGPUs, "GPU"), plural(margin, "GPU"))
	case !anySlice:
		return "time-slicing: no allocation fits a MIG slice"
	}
	return "time-slicing: " + migCostsMore(migGPUs-tsGPUs, margin)
}

// migCostsMore says why MIG lost: it needs more GPUs than time-slicing,
// by more than the isolation margin allows.
func migCostsMore(more, margin int) string {
	s := fmt.Sprintf("MIG would need %s more", plural(more, "GPU"))
	if margin > 0 {
		s += fmt.Sprintf(", over the isolation margin of %s", plural(margin, "GPU"))
	}
	return s
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// timeSlice packs ds for time-slicing: each user's work on GPUs of its
// own unless the operator lets users share (TimeSliceAcrossUsers).
func (o *Options) timeSlice(ds []pack.Demand, capa pack.Capacity) []pack.Bin {
	if o.TimeSliceAcrossUsers {
		return pack.TimeSlice(ds, capa)
	}
	return pack.TimeSliceByOwner(ds, capa)
}

// sharingScope says whose work a time-sliced GPU may mix.
func (o *Options) sharingScope() string {
	if o.TimeSliceAcrossUsers {
		return "different users' work mixed (allowed by --pool.time-slice-across-users)"
	}
	return "each user's work only with that user's own (the team's or namespace's where no user is known)"
}

func (o *Options) timeSliceGPUs(bins []pack.Bin, ds []pack.Demand, _ []int) []GPU {
	out := make([]GPU, 0, len(bins))
	for _, b := range bins {
		gp := GPU{Mode: "time_slice", P95Load: b.P95Load(), ContendedHours: b.ContendedHours(), Isolation: SharedTimeSlice}
		if len(b.Items) == 1 {
			gp.Isolation = Alone
		}
		for _, i := range b.Items {
			gp.place(ds[i].ID)
		}
		out = append(out, gp)
	}
	return out
}

// place adds the demand whose key is id (demand.Item.Key: host|device|job)
// to the GPU's jobs and devices.
func (g *GPU) place(id string) {
	parts := strings.SplitN(id, "|", 3)
	if len(parts) != 3 {
		g.Jobs, g.Devices = append(g.Jobs, id), append(g.Devices, "")
		return
	}
	g.Jobs, g.Devices = append(g.Jobs, parts[2]), append(g.Devices, parts[0]+"/"+parts[1])
}

// allocations groups items into jobs with a recommendation each.
func (o *Options) allocations(res *demand.Result) []Allocation {
	type acc struct {
		a     Allocation
		known bool
		hours []float64
	}
	jobs := map[string]*acc{}
	var keys []string
	how := o.hoursOfWeek(res)
	for i := range res.Items {
		it := &res.Items[i]
		if it.Job == "" {
			continue
		}
		k := it.Pool + "|" + it.Host + "|" + it.Job
		a := jobs[k]
		if a == nil {
			a = &acc{a: Allocation{Pool: it.Pool, Host: it.Host, Job: it.Job, Team: it.Team, User: it.User, Kind: it.Kind}, known: true}
			jobs[k] = a
			keys = append(keys, k)
		}
		a.a.GPUs++
		a.a.Samples += it.Samples
		a.known = a.known && o.known(it)
		a.a.Compute = maxStats(a.a.Compute, it.Compute)
		a.a.Memory = maxStats(a.a.Memory, it.Memory)
		a.hours = maxHours(a.hours, hourOfWeek(it, how))
		if it.Model != "" {
			g, ok := mig.Lookup(it.Model)
			if !ok {
				continue
			}
			if a.known {
				a.a.Recommendation = o.recommend(&a.a, g)
			}
		}
	}
	sort.Strings(keys)
	out := make([]Allocation, 0, len(keys))
	for _, k := range keys {
		a := jobs[k]
		if !a.known {
			a.a.Recommendation, a.a.Profile, a.a.SmallerModel = RecUnknown, "", ""
		} else if a.a.Recommendation == "" {
			a.a.Recommendation = o.recommend(&a.a, nil)
		}
		a.a.HourOfWeek = a.hours
		out = append(out, a.a)
	}
	return out
}

// recommend picks the least that would do for an allocation's per-GPU demand.
func (o *Options) recommend(a *Allocation, g *mig.Model) string {
	a.Profile, a.SmallerModel = "", ""
	c, m := a.Compute.P95*o.ComputeHeadroom, a.Memory.Peak*o.MemoryHeadroom
	switch {
	case a.Compute.Peak <= o.NoActivity && a.Memory.P50 == a.Memory.Peak:
		// No work, and memory held as it was: unused. (Memory is the
		// highest per hour; a service that loads or frees any is live.)
		return RecIdle
	case g == nil:
		if c <= o.TargetLoad/2 {
			return RecShare
		}
		return RecWhole
	}
	if p, ok := g.Fit(c, m); ok {
		a.Profile = p.Name
		return RecMIG
	}
	if s, ok := mig.Smaller(g, m); ok && c*g.TFLOPS/s.TFLOPS <= o.TargetLoad {
		a.SmallerModel = s.Key
		return RecSmaller
	}
	return RecWhole
}

func maxStats(a, b demand.Stats) demand.Stats {
	return demand.Stats{P50: max(a.P50, b.P50), P95: max(a.P95, b.P95), Peak: max(a.Peak, b.Peak)}
}

func maxHours(a, b []float64) []float64 {
	if a == nil {
		return b
	}
	for i := range a {
		a[i] = max(a[i], b[i])
	}
	return a
}

// HoursOfWeek is the length of the hour-of-week profiles; hour 0 is Monday
// 00:00-01:00 in the plan's location.
const HoursOfWeek = 168

// HourOfWeek returns the hour-of-week index of t in loc.
func HourOfWeek(t time.Time, loc *time.Location) int {
	t = t.In(loc)
	return ((int(t.Weekday())+6)%7)*24 + t.Hour()
}

// hoursOfWeek is the hour-of-week index of each hour of res's window.
func (o *Options) hoursOfWeek(res *demand.Result) []int {
	out := make([]int, res.Hours)
	for h := range out {
		out[h] = HourOfWeek(res.From.Add(time.Duration(h)*time.Hour), o.Location)
	}
	return out
}

// hourOfWeek folds an item's hourly p95 into the highest per hour of week;
// how is the window's hoursOfWeek.
func hourOfWeek(it *demand.Item, how []int) []float64 {
	out := make([]float64, HoursOfWeek)
	for h, x32 := range it.HourP95 {
		x := float64(x32)
		if math.IsNaN(x) || h >= len(how) {
			continue
		}
		out[how[h]] = max(out[how[h]], x)
	}
	return out
}
