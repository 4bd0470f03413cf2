// Package attribution says who holds each GPU: it fills a snapshot's
// allocations (Kubernetes pods from the kubelet, batch jobs from a
// job-mapping folder), ties GPU processes to their job and user through /proc
// and cgroups, marks processes of no live job as orphans, and reads each
// job's CPU time from its cgroup.
//
// Chain implements source.Attributor. Attribute never waits on a remote
// service: the kubelet is read in the background (Start), and everything
// else Attribute reads is local files, cached by mtime or process start time.
package attribution

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuwatch/gpuwatch/exporter/attribution/cgroup"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/jobmap"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/kubelet"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/procfs"
	"github.com/gpuwatch/gpuwatch/exporter/attribution/teams"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Attributor names, the values of the attributor label of the health metrics.
const (
	AttributorKubelet = "kubelet"
	AttributorJobMap  = "jobmap"
	AttributorProc    = "proc"
	AttributorCgroup  = "cgroup"
)

// PodInfo is a pod's identity and labels from the API server.
type PodInfo struct {
	Namespace, Name, UID string
	Labels               map[string]string
}

// PodMetadata is optional pod metadata (from the API server, restricted to
// this node). The lean exporter has none: it would pull client-go in. Without
// it, team rules by pod label do not apply, and a pod process is tied to its
// pod through the GPU it runs on rather than through its pod UID.
type PodMetadata interface {
	Pod(namespace, name string) (PodInfo, bool)
	PodByUID(uid string) (PodInfo, bool)
}

// MIGResolver maps a MIG device UUID ("MIG-…", as newer device plugins name
// MIG devices) to its parent GPU's UUID and GPU instance id. NVML knows; the
// snapshot does not carry MIG UUIDs.
type MIGResolver func(migUUID string) (parentUUID string, giid int, ok bool)

// Options configure a Chain. Every source is optional.
type Options struct {
	// Kubelet enables the pod-resources client when non-nil.
	Kubelet *kubelet.Options
	// JobMapDir is the job-mapping folder (--hpc-job-mapping-dir); "" for none.
	JobMapDir string
	// ProcRoot is the proc file system (default /proc); CgroupRoot the cgroup
	// file system (default /sys/fs/cgroup).
	ProcRoot, CgroupRoot string
	// Teams maps owners to teams and jobs to kinds; nil applies the built-in kinds.
	Teams *teams.Config
	// Pods is optional pod metadata.
	Pods PodMetadata
	// MIG resolves MIG device UUIDs; nil leaves "MIG-<uuid>" devices unmatched.
	MIG MIGResolver
	// Users maps uids to names; default os/user.
	Users      procfs.UserLookup
	Logger     *slog.Logger
	Clock      source.Clock
	Registerer prometheus.Registerer
	// NegativeCacheTTL is how long a job whose cgroup was not found is not
	// looked for again (default 30s): globbing every cycle for a job that has
	// no cgroup (proctrack/linuxproc) would cost more than all else here.
	NegativeCacheTTL time.Duration
}

// Chain is the attribution chain. Attribute is not safe for concurrent use;
// the collector calls it from its one collection goroutine.
type Chain struct {
	opts    Options
	kube    *kubelet.Client
	jobmap  *jobmap.Reader
	procs   *procfs.Reader
	cpu     cgroup.CPU
	errors  *prometheus.CounterVec
	refresh *prometheus.GaugeVec
	// jobCgroups remembers where each job's cgroup is, found from its
	// processes or by looking; missing remembers when a job had none.
	jobCgroups map[string]jobCgroup
	missing    map[string]time.Time
	lastErr    map[string]string
}

type jobCgroup struct {
	path    string
	version int
	counter *cgroup.Counter // open while the job holds a GPU
}

// New builds a chain and registers its health metrics on opts.Registerer.
func New(opts Options) (*Chain, error) {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.CgroupRoot == "" {
		opts.CgroupRoot = "/sys/fs/cgroup"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = source.SystemClock{}
	}
	if opts.NegativeCacheTTL <= 0 {
		opts.NegativeCacheTTL = 30 * time.Second
	}
	c := &Chain{
		opts:       opts,
		procs:      procfs.New(opts.ProcRoot, opts.Users),
		cpu:        cgroup.CPU{Root: opts.CgroupRoot},
		errors:     schema.AttributionErrors.CounterVec(),
		refresh:    schema.AttributionLastRefresh.GaugeVec(),
		jobCgroups: map[string]jobCgroup{},
		missing:    map[string]time.Time{},
		lastErr:    map[string]string{},
	}
	names := []string{AttributorProc, AttributorCgroup}
	if opts.JobMapDir != "" {
		c.jobmap = jobmap.NewReader(opts.JobMapDir)
		names = append(names, AttributorJobMap)
	}
	if opts.Kubelet != nil {
		ko := *opts.Kubelet
		if ko.Logger == nil {
			ko.Logger = opts.Logger
		}
		if ko.Clock == nil {
			ko.Clock = opts.Clock
		}
		user := ko.OnRefresh
		ko.OnRefresh = func(err error) {
			c.outcome(AttributorKubelet, err)
			if user != nil {
				user(err)
			}
		}
		k, err := kubelet.New(ko)
		if err != nil {
			return nil, err
		}
		c.kube = k
		names = append(names, AttributorKubelet)
	}
	// Zero series from the start, so rate() and absent() work before the first fault.
	for _, n := range names {
		c.errors.WithLabelValues(n)
	}
	if opts.Registerer != nil {
		if err := c.Register(opts.Registerer); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Register registers the chain's health metrics (errors and last refresh per
// attributor), for when the registry exists only after the chain (the
// collector's, which needs the chain first).
func (c *Chain) Register(r prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{c.errors, c.refresh} {
		if err := r.Register(col); err != nil {
			return fmt.Errorf("attribution: register health metrics: %w", err)
		}
	}
	return nil
}

// Start refreshes the kubelet map once, bounded by the kubelet timeout, so
// the first collection already has pods when the kubelet answers.
func (c *Chain) Start(ctx context.Context) {
	if c.kube != nil {
		_ = c.kube.Refresh(ctx)
	}
}

// Run refreshes the kubelet map every interval until ctx ends; without a
// kubelet it only waits for ctx, so that it may join a run group whatever
// the chain holds.
func (c *Chain) Run(ctx context.Context) {
	if c.kube == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(c.kubeInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_ = c.kube.Refresh(ctx)
	}
}

func (c *Chain) kubeInterval() time.Duration {
	if c.opts.Kubelet != nil && c.opts.Kubelet.Interval > 0 {
		return c.opts.Kubelet.Interval
	}
	return 10 * time.Second
}

// Close releases the kubelet connection.
func (c *Chain) Close() error {
	for job := range c.jobCgroups {
		c.dropCgroup(job)
	}
	if c.kube != nil {
		return c.kube.Close()
	}
	return nil
}

// Kubelet returns the kubelet client, nil when disabled.
func (c *Chain) Kubelet() *kubelet.Client { return c.kube }

// outcome records a source's success or failure in the health metrics and
// logs a failure once per distinct message, not once per cycle.
func (c *Chain) outcome(name string, err error) {
	if err == nil {
		c.refresh.WithLabelValues(name).Set(float64(c.opts.Clock.Now().UnixNano()) / 1e9)
		return
	}
	c.errors.WithLabelValues(name).Inc()
	if name == AttributorKubelet {
		return // the kubelet client logs its own failures
	}
	if msg := err.Error(); c.lastErr[name] != msg {
		c.lastErr[name] = msg
		c.opts.Logger.Warn("attribution source failed", "attributor", name, "err", err)
	}
}

// devices indexes a snapshot's devices.
type devices struct {
	byKey     map[string]*source.Device
	byUUID    map[string][]*source.Device // every device (whole or MIG) of a GPU
	byIndex   map[int][]*source.Device
	byIndexGI map[[2]int]*source.Device
}

func index(snap *source.Snapshot) devices {
	d := devices{
		byKey:     make(map[string]*source.Device, len(snap.Devices)),
		byUUID:    map[string][]*source.Device{},
		byIndex:   map[int][]*source.Device{},
		byIndexGI: map[[2]int]*source.Device{},
	}
	for i := range snap.Devices {
		dev := &snap.Devices[i]
		d.byKey[dev.Key()] = dev
		d.byUUID[dev.UUID] = append(d.byUUID[dev.UUID], dev)
		d.byIndex[dev.Index] = append(d.byIndex[dev.Index], dev)
		if dev.MIG != nil {
			d.byIndexGI[[2]int{dev.Index, dev.MIG.GIID}] = dev
		}
	}
	return d
}

// Attribute fills snap's allocations, process owners and job CPU times.
func (c *Chain) Attribute(snap *source.Snapshot) {
	devs := index(snap)
	ours := c.kubeAllocations(devs)
	ours = append(ours, c.jobMapAllocations(devs)...)
	snap.Allocations = append(snap.Allocations, ours...)
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		if a.Labels == nil && c.opts.Pods != nil && a.Pod != "" {
			if p, ok := c.opts.Pods.Pod(a.Namespace, a.Pod); ok {
				a.Labels = p.Labels
			}
		}
		c.opts.Teams.Apply(a)
	}
	c.attributeProcesses(snap)
	c.jobCPU(snap)
}

func (c *Chain) kubeAllocations(devs devices) []source.Allocation {
	if c.kube == nil {
		return nil
	}
	m := c.kube.Latest()
	if m == nil {
		return nil
	}
	ids := make([]string, 0, len(m.Devices))
	for id := range m.Devices {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	type seenKey struct{ key, ns, pod, ctr string }
	seen := map[seenKey]bool{}
	var out []source.Allocation
	for _, id := range ids {
		for _, dev := range c.resolve(devs, id) {
			for _, h := range m.Devices[id] {
				k := seenKey{dev.Key(), h.Namespace, h.Pod, h.Container}
				if seen[k] { // time-slicing replicas of one pod
					continue
				}
				seen[k] = true
				out = append(out, source.Allocation{
					DeviceKey: dev.Key(), Scheduler: schema.SchedulerKubernetes,
					Pod: h.Pod, Namespace: h.Namespace, Container: h.Container,
				})
			}
		}
	}
	return out
}

// resolve finds the snapshot devices a device-plugin id names.
func (c *Chain) resolve(devs devices, id string) []*source.Device {
	ref, ok := kubelet.ParseDeviceID(id)
	if !ok {
		return nil
	}
	switch {
	case ref.Index >= 0:
		return wholeGPU(devs.byIndex[ref.Index])
	case ref.MIGUUID:
		if c.opts.MIG == nil {
			return nil
		}
		parent, gi, ok := c.opts.MIG(ref.UUID)
		if !ok {
			return nil
		}
		if d, ok := devs.byKey[source.DeviceKey(parent, &source.MIG{GIID: gi})]; ok {
			return []*source.Device{d}
		}
		return nil
	case ref.GIID >= 0:
		if d, ok := devs.byKey[source.DeviceKey(ref.UUID, &source.MIG{GIID: ref.GIID})]; ok {
			return []*source.Device{d}
		}
		return nil
	default:
		return wholeGPU(devs.byUUID[ref.UUID])
	}
}

// wholeGPU returns the whole-GPU device among ds, or, for a GPU in MIG mode
// that the snapshot lists only by instance, every instance: holding the GPU
// means holding all of them.
func wholeGPU(ds []*source.Device) []*source.Device {
	for _, d := range ds {
		if d.MIG == nil {
			return []*source.Device{d}
		}
	}
	return ds
}

func (c *Chain) jobMapAllocations(devs devices) []source.Allocation {
	if c.jobmap == nil {
		return nil
	}
	m, err := c.jobmap.Read()
	c.outcome(AttributorJobMap, err)
	var out []source.Allocation
	for _, slot := range m.Slots() {
		var targets []*source.Device
		if slot.GI >= 0 {
			if d, ok := devs.byIndexGI[[2]int{slot.GPU, slot.GI}]; ok {
				targets = []*source.Device{d}
			}
		} else {
			targets = wholeGPU(devs.byIndex[slot.GPU])
		}
		for _, d := range targets {
			for _, e := range m[slot] {
				out = append(out, source.Allocation{
					DeviceKey: d.Key(), Scheduler: schema.SchedulerSlurm,
					HPCJob: e.Job, User: e.User, Account: e.Account, JobName: e.Name, Start: e.Start,
				})
			}
		}
	}
	return out
}

func (c *Chain) attributeProcesses(snap *source.Snapshot) {
	live := map[string]bool{}
	byDevice := map[string][]*source.Allocation{}
	for i := range snap.Allocations {
		a := &snap.Allocations[i]
		live[a.JobID()] = true
		byDevice[a.DeviceKey] = append(byDevice[a.DeviceKey], a)
	}
	kubeKnown := c.kube != nil && c.kube.Latest() != nil
	batchKnown := c.jobmap != nil
	pids := make(map[int]bool, len(snap.Processes))
	var errs []error
	for i := range snap.Processes {
		p := &snap.Processes[i]
		if p.Command != "" {
			continue // the source named it already (the simulator's processes are not in /proc)
		}
		pids[p.PID] = true
		info, err := c.procs.Process(p.PID)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && info.Command == "" {
				continue // exited since NVML listed it
			}
			errs = append(errs, err)
		}
		p.Command = info.Command
		if p.User == "" && info.UID >= 0 {
			p.User, p.UID = info.User, info.UID
		}
		allocs := byDevice[p.DeviceKey]
		switch {
		case info.Owner.SlurmJob != "" || info.EnvJob != "":
			job := info.Owner.SlurmJob
			if job == "" {
				job = info.EnvJob
			}
			p.Job = job
			p.Orphan = batchKnown && !live[job]
			if info.JobPath != "" {
				c.rememberCgroup(job, info.JobPath, info.Owner.Version)
			}
		case info.Owner.PodUID != "":
			if c.opts.Pods != nil {
				if pod, ok := c.opts.Pods.PodByUID(info.Owner.PodUID); ok {
					p.Job = pod.Namespace + "/" + pod.Name
				}
			}
			if p.Job == "" {
				p.Job = onlyPod(allocs)
			}
			if p.Job != "" {
				p.Orphan = kubeKnown && !live[p.Job]
			} else {
				// A pod's process on a GPU no pod holds now.
				p.Orphan = kubeKnown && !hasScheduler(allocs, schema.SchedulerKubernetes)
			}
			if info.JobPath != "" && p.Job != "" {
				c.rememberCgroup(p.Job, info.JobPath, info.Owner.Version)
			}
		default:
			// In no job. On a GPU held by one batch job it is that job's: batch
			// schedulers without cgroup tracking leave no other trace (pods
			// always have their cgroup, so this never applies to them). On a
			// GPU no batch job holds, it was never scheduled.
			batch := batchAllocs(allocs)
			if len(batch) > 0 {
				p.Job = onlyJob(batch)
			} else if (kubeKnown || batchKnown) && p.Type != source.Graphics {
				p.Orphan = true
			}
		}
	}
	c.procs.Forget(pids)
	c.outcome(AttributorProc, errors.Join(errs...))
}

// findCgroup looks for the cgroup of a job that no GPU process has named:
// a Slurm job by its id, a pod by its UID (from the optional pod metadata).
func (c *Chain) findCgroup(job string, isHPC bool, pod [2]string) (string, int, bool) {
	if isHPC {
		return c.cpu.FindSlurmJob(job)
	}
	info, ok := c.opts.Pods.Pod(pod[0], pod[1])
	if !ok || info.UID == "" {
		return "", 0, false
	}
	return c.cpu.FindPod(info.UID)
}

// rememberCgroup notes where a job's cgroup is, keeping an open counter
// when the path is unchanged.
func (c *Chain) rememberCgroup(job, path string, version int) {
	if old, ok := c.jobCgroups[job]; ok {
		if old.path == path && old.version == version {
			return
		}
		c.dropCgroup(job)
	}
	c.jobCgroups[job] = jobCgroup{path: path, version: version}
}

func (c *Chain) dropCgroup(job string) {
	if cg, ok := c.jobCgroups[job]; ok && cg.counter != nil {
		_ = cg.counter.Close()
	}
	delete(c.jobCgroups, job)
}

func onlyPod(allocs []*source.Allocation) string {
	job := ""
	for _, a := range allocs {
		if a.Scheduler != schema.SchedulerKubernetes {
			continue
		}
		if job != "" && job != a.JobID() {
			return "" // a shared GPU: the pod cannot be told without its UID
		}
		job = a.JobID()
	}
	return job
}

func onlyJob(allocs []*source.Allocation) string {
	job := ""
	for _, a := range allocs {
		if job != "" && job != a.JobID() {
			return ""
		}
		job = a.JobID()
	}
	return job
}

func batchAllocs(allocs []*source.Allocation) []*source.Allocation {
	var out []*source.Allocation
	for _, a := range allocs {
		if a.Scheduler != schema.SchedulerKubernetes {
			out = append(out, a)
		}
	}
	return out
}

func hasScheduler(allocs []*source.Allocation, s string) bool {
	for _, a := range allocs {
		if a.Scheduler == s {
			return true
		}
	}
	return false
}

func (c *Chain) jobCPU(snap *source.Snapshot) {
	have := map[string]bool{}
	for _, j := range snap.JobCPU {
		have[j.Job] = true
	}
	now := c.opts.Clock.Now()
	var jobs []string
	hpc := map[string]bool{}
	pods := map[string][2]string{}
	for _, a := range snap.Allocations {
		id := a.JobID()
		if id == "" || have[id] {
			continue
		}
		have[id] = true
		jobs = append(jobs, id)
		if a.HPCJob != "" {
			hpc[id] = true
		} else if a.Pod != "" {
			pods[id] = [2]string{a.Namespace, a.Pod}
		}
	}
	sort.Strings(jobs)
	var errs []error
	for _, job := range jobs {
		cg, ok := c.jobCgroups[job]
		if !ok && (hpc[job] || c.opts.Pods != nil && pods[job] != [2]string{}) {
			if t, miss := c.missing[job]; !miss || now.Sub(t) >= c.opts.NegativeCacheTTL {
				if p, v, found := c.findCgroup(job, hpc[job], pods[job]); found {
					cg, ok = jobCgroup{path: p, version: v}, true
					c.jobCgroups[job] = cg
					delete(c.missing, job)
				} else {
					c.missing[job] = now
				}
			}
		}
		if !ok {
			continue
		}
		if cg.counter == nil {
			k, err := c.cpu.Open(cg.path, cg.version)
			if err != nil {
				delete(c.jobCgroups, job)
				if !errors.Is(err, fs.ErrNotExist) { // a job that just ended
					errs = append(errs, err)
				}
				continue
			}
			cg.counter = k
			c.jobCgroups[job] = cg
		}
		secs, err := cg.counter.Seconds()
		if err != nil {
			// ENODEV: the cgroup was removed under the open file (the job ended).
			c.dropCgroup(job)
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENODEV) {
				errs = append(errs, err)
			}
			continue
		}
		snap.JobCPU = append(snap.JobCPU, source.JobCPU{Job: job, Seconds: secs})
	}
	// Forget jobs that hold no GPU any more.
	for job := range c.jobCgroups {
		if !have[job] {
			c.dropCgroup(job)
		}
	}
	for job := range c.missing {
		if !have[job] {
			delete(c.missing, job)
		}
	}
	c.outcome(AttributorCgroup, errors.Join(errs...))
}
