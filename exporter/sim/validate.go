package sim

import (
	"cmp"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuwatch/gpuwatch/internal/configfile"
	"github.com/gpuwatch/gpuwatch/schema"
)

// validator converts raw values and collects every error, each at the
// line of its key (through internal/configfile's Doc).
type validator struct {
	file string
	doc  *configfile.Doc
	errs configfile.Errors
}

// fail records an error at a key path such as "workloads", 3, "behaviour".
func (v *validator) fail(msg string, path ...any) {
	v.errs = append(v.errs, v.doc.Errorf(keyPath(path), "%s", msg))
}

func (v *validator) failf(path []any, format string, args ...any) {
	v.fail(fmt.Sprintf(format, args...), path...)
}

// clean reports whether no error was recorded since mark (len(v.errs)).
func (v *validator) clean(mark int) bool { return len(v.errs) == mark }

// keyPath writes a path the way configfile names keys: "workloads[3].behaviour".
func keyPath(path []any) string {
	var key strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case string:
			if key.Len() > 0 {
				key.WriteByte('.')
			}
			key.WriteString(p)
		case int:
			key.WriteString("[" + strconv.Itoa(p) + "]")
		}
	}
	return key.String()
}

func path(p ...any) []any { return p }

// maxFleetGPUs bounds the fleet: collection cost grows with it, and a
// bigger fleet is better simulated by several exporters.
const maxFleetGPUs = 4096

func (v *validator) scenario(raw *scenarioFile) *Scenario {
	sc := &Scenario{Name: raw.Name, Description: raw.Description}
	if sc.Name == "" {
		sc.Name = strings.TrimSuffix(filepath.Base(v.file), filepath.Ext(v.file))
	}
	if raw.Origin != nil {
		sc.Origin = raw.Origin.T()
	}
	sc.Repeat = time.Duration(raw.Repeat)
	sc.Noise = v.noise(raw.Noise)
	if len(raw.Fleet) == 0 {
		v.fail("at least one node is needed", "fleet")
	}
	nodes := map[string]bool{}
	for i := range raw.Fleet {
		v.nodeGroup(&raw.Fleet[i], path("fleet", i), sc, nodes)
	}
	total := 0
	for _, n := range sc.Nodes {
		total += n.GPUs
	}
	if total > maxFleetGPUs {
		v.failf(path("fleet"), "%d GPUs: a simulated fleet has at most %d", total, maxFleetGPUs)
	}
	if len(v.errs) > 0 {
		return sc
	}
	byName := map[string]*Node{}
	for i := range sc.Nodes {
		byName[sc.Nodes[i].Hostname] = &sc.Nodes[i]
	}
	for i := range raw.Workloads {
		if w, ok := v.workload(&raw.Workloads[i], i, byName); ok {
			sc.Workloads = append(sc.Workloads, w)
		}
	}
	for i := range raw.Faults {
		if f, ok := v.fault(&raw.Faults[i], i, byName); ok {
			sc.Faults = append(sc.Faults, f)
		}
	}
	if len(v.errs) == 0 {
		v.overlaps(sc)
	}
	return sc
}

func (v *validator) noise(raw noiseFile) Noise {
	if n := raw.IdleUtilPercent; n < 0 || n > 10 {
		v.failf(path("noise", "idle_util_percent"), "must be between 0 and 10, got %v", n)
	}
	if n := raw.PowerJitterW; n < 0 || n > 50 {
		v.failf(path("noise", "power_jitter_w"), "must be between 0 and 50, got %v", n)
	}
	if n := raw.BoardIdleSpread; n < 0 || n > 0.5 {
		v.failf(path("noise", "board_idle_spread"), "must be between 0 and 0.5, got %v", n)
	}
	return Noise(raw)
}

// nodeGroup adds the nodes of one fleet entry (at p) to sc; seen holds
// the host names defined so far.
func (v *validator) nodeGroup(g *nodeGroupFile, p []any, sc *Scenario, seen map[string]bool) {
	m, ok := LookupModel(string(g.Model))
	if !ok {
		v.failf(p, "model is required (known: %s)", strings.Join(ModelKeys(), ", "))
		return
	}
	n := g.GPUs
	if n == 0 {
		n = 8
	}
	if n < 1 || n > 16 {
		v.failf(append(p, "gpus"), "must be between 1 and 16, got %d", g.GPUs)
		return
	}
	names := g.Hostnames
	if g.Hostname != "" {
		if len(names) > 0 {
			v.failf(append(p, "hostnames"), "set hostname or hostnames, not both")
		}
		names = []string{g.Hostname}
	}
	if len(names) == 0 {
		v.failf(p, "hostname or hostnames is required")
	}
	mig := v.migLayout(g, p, n, m)
	for j, h := range names {
		hp := append(append([]any{}, p...), "hostname")
		if len(g.Hostnames) > 0 {
			hp = append(append([]any{}, p...), "hostnames", j)
		}
		if h == "" || strings.ContainsAny(h, " \t\n\"\\") {
			v.failf(hp, "invalid hostname %q", h)
			continue
		}
		if seen[h] {
			v.failf(hp, "hostname %q defined twice", h)
			continue
		}
		sc.Nodes = append(sc.Nodes, Node{Hostname: h, Model: m, GPUs: n, MIG: mig})
		seen[h] = true
	}
}

// migLayout is a fleet entry's MIG profiles per GPU index, each GPU's
// profiles within its memory.
func (v *validator) migLayout(g *nodeGroupFile, p []any, n int, m *Model) map[int][]string {
	mig := map[int][]string{}
	for j, mg := range g.MIG {
		mp := append(append([]any{}, p...), "mig", j)
		if mg.GPU < 0 || mg.GPU >= n {
			v.failf(append(mp, "gpu"), "GPU index %d out of range 0-%d", mg.GPU, n-1)
			continue
		}
		if _, dup := mig[mg.GPU]; dup {
			v.failf(append(mp, "gpu"), "GPU %d listed twice", mg.GPU)
		}
		if len(mg.Profiles) == 0 || len(mg.Profiles) > 7 {
			v.failf(append(mp, "profiles"), "between 1 and 7 profiles needed")
		}
		var used float64
		profiles := make([]string, len(mg.Profiles))
		for k, prof := range mg.Profiles {
			gib, _ := migProfileGiB(string(prof)) // checked as decoded
			used += gib * 1024
			profiles[k] = string(prof)
		}
		if used > m.MemoryMiB {
			v.failf(append(mp, "profiles"), "profiles need %.0f MiB, the GPU has %.0f", used, m.MemoryMiB)
		}
		mig[mg.GPU] = profiles
	}
	return mig
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (v *validator) gpuList(gpus []int, n *Node, p []any) {
	seen := map[int]bool{}
	for j, g := range gpus {
		if g < 0 || g >= n.GPUs {
			v.failf(append(p, j), "GPU index %d out of range 0-%d on %s", g, n.GPUs-1, n.Hostname)
			return
		}
		if seen[g] {
			v.failf(append(p, j), "GPU %d listed twice", g)
			return
		}
		seen[g] = true
	}
}

func (v *validator) workload(r *workloadFile, i int, nodes map[string]*Node) (Workload, bool) {
	p := func(k ...any) []any { return append([]any{"workloads", i}, k...) }
	w := Workload{ID: r.ID, Scheduler: string(r.Scheduler), Namespace: r.Namespace, Container: r.Container,
		User: r.User, Account: r.Account, Team: r.Team, Kind: string(r.Kind), JobName: r.JobName, Command: r.Command,
		Node: r.Node, GPUs: r.GPUs, Behaviour: r.Behaviour, Labels: r.Labels, Shared: r.Shared}
	for _, e := range r.Expect {
		w.Expect = append(w.Expect, string(e))
	}
	mark := len(v.errs)
	w.line = v.doc.Line(keyPath(p()))
	w.key = hashString(r.Node + "/" + r.ID)
	if w.ID == "" {
		v.fail("id is required", p()...)
		return w, false
	}
	if strings.ContainsAny(w.ID, " \t\n\"\\/,") {
		v.failf(p("id"), "invalid id %q", w.ID)
	}
	if w.Behaviour == "" {
		v.fail("behaviour is required", p()...)
		return w, false
	}
	v.owner(&w, p)
	n, ok := nodes[w.Node]
	if !ok {
		v.failf(p("node"), "unknown node %q", w.Node)
		return w, false
	}
	v.placement(r, &w, n, p)
	w.Start = time.Duration(r.Start)
	switch {
	case r.End != nil && r.Duration != nil:
		v.failf(p("duration"), "set end or duration, not both")
	case r.End != nil:
		w.End = time.Duration(*r.End)
	case r.Duration != nil:
		w.End = w.Start + time.Duration(*r.Duration)
	default:
		v.fail("end or duration is required", p()...)
	}
	if w.End > maxOffset {
		v.failf(p("start"), "offsets must be within 10 years of the origin")
	}
	if v.clean(mark) && w.End <= w.Start {
		v.failf(p("end"), "end (%s) must be after start (%s)", w.End, w.Start)
	}
	w.Params = v.params(&r.Params, &w, p("params"))
	return w, v.clean(mark)
}

// owner checks a workload's scheduler and owner and fills their
// defaults: Slurm, the team as the account (and back), the behaviour as
// the job name, the kind its behaviour implies.
func (v *validator) owner(w *Workload, p func(k ...any) []any) {
	if w.Scheduler == "" {
		w.Scheduler = schema.SchedulerSlurm
	}
	if w.Scheduler == schema.SchedulerKubernetes {
		w.Namespace = cmp.Or(w.Namespace, "default")
		w.Container = cmp.Or(w.Container, "main")
	} else if w.Namespace != "" || w.Container != "" {
		v.failf(p("namespace"), "namespace and container are for scheduler kubernetes")
	}
	if w.User == "" {
		v.fail("user is required", p()...)
	}
	w.Team = cmp.Or(w.Team, w.Account)
	w.Account = cmp.Or(w.Account, w.Team)
	w.JobName = cmp.Or(w.JobName, string(w.Behaviour))
	if w.Kind == "" {
		switch w.Behaviour {
		case IdleNotebook, Notebook:
			w.Kind = schema.KindInteractive
		case InferenceDaily:
			w.Kind = schema.KindService
		default:
			w.Kind = schema.KindBatch
		}
	}
	if (w.Behaviour == IdleNotebook || w.Behaviour == Notebook) && w.Kind != schema.KindInteractive {
		v.failf(p("kind"), "behaviour %s needs kind interactive", w.Behaviour)
	}
}

// placement checks where on node n a workload runs: whole GPUs, or one
// MIG instance of a GPU in MIG mode.
func (v *validator) placement(r *workloadFile, w *Workload, n *Node, p func(k ...any) []any) {
	if r.MIG != nil {
		if len(r.GPUs) > 0 {
			v.failf(p("mig"), "set gpus or mig, not both")
		}
		profs, ok := n.MIG[r.MIG.GPU]
		if !ok {
			v.failf(p("mig", "gpu"), "GPU %d of %s is not in MIG mode", r.MIG.GPU, n.Hostname)
		} else if r.MIG.Instance < 1 || r.MIG.Instance > len(profs) {
			v.failf(p("mig", "instance"), "instance %d out of range 1-%d", r.MIG.Instance, len(profs))
		}
		w.MIG = &MIGRef{GPU: r.MIG.GPU, Instance: r.MIG.Instance}
		w.GPUs = nil
		return
	}
	if len(w.GPUs) == 0 {
		v.fail("gpus (or mig) is required", p()...)
	}
	v.gpuList(w.GPUs, n, p("gpus"))
	for _, g := range w.GPUs {
		if _, isMIG := n.MIG[g]; isMIG {
			v.failf(p("gpus"), "GPU %d of %s is in MIG mode: use mig", g, n.Hostname)
			break
		}
	}
}

// behaviourParams lists the parameters each behaviour reads; setting another
// one is an error, since it would silently do nothing.
var behaviourParams = map[Behaviour][]string{
	Training:       {"util", "memory_gib", "cpu_cores"},
	Overlong:       {"util", "memory_gib", "cpu_cores"},
	BurstyTraining: {"util", "memory_gib", "cpu_cores", "stall_every", "stall"},
	InferenceDaily: {"min_util", "max_util", "period", "phase", "quiet", "memory_gib", "cpu_cores"},
	CPUOnly:        {"cpu_cores"},
	HungCollective: {"active", "util", "memory_gib", "cpu_cores"},
	NCCLHang:       {"active", "util", "memory_gib", "cpu_cores"},
	SmallBatch:     {"util", "memory_gib", "cpu_cores"},
	StuckIdle:      {"active", "util", "memory_gib", "cpu_cores"},
	IdleNotebook:   {"active", "util", "memory_gib", "cpu_cores"},
	Notebook:       {"every", "burst", "util", "memory_gib", "cpu_cores"},
	StartupDelay:   {"delay", "util", "memory_gib", "cpu_cores"},
	LowUtil:        {"util", "memory_gib", "cpu_cores"},
	PartialGPUs:    {"idle_gpus", "util", "memory_gib", "cpu_cores"},
	Orphan:         {"orphan_for", "util", "memory_gib", "cpu_cores"},
}

// set lists the parameters present in the file, in declaration order.
func (r *paramsFile) set() []string {
	var out []string
	for _, kv := range []struct {
		k  string
		on bool
	}{
		{"util", r.Util != nil}, {"memory_gib", r.MemoryGiB != nil}, {"active", r.Active != nil},
		{"delay", r.Delay != nil}, {"stall_every", r.StallEvery != nil}, {"stall", r.Stall != nil},
		{"period", r.Period != nil}, {"phase", r.Phase != nil}, {"min_util", r.MinUtil != nil}, {"max_util", r.MaxUtil != nil},
		{"idle_gpus", r.IdleGPUs != nil}, {"orphan_for", r.OrphanFor != nil}, {"cpu_cores", r.CPUCores != nil},
		{"every", r.Every != nil}, {"burst", r.Burst != nil}, {"quiet", r.Quiet != nil},
	} {
		if kv.on {
			out = append(out, kv.k)
		}
	}
	return out
}

// orDefault is a parameter's value from the file, or its behaviour's default.
func orDefault[T ~float64 | ~int64, V ~float64 | ~int64](f *T, def V) V {
	if f == nil {
		return def
	}
	return V(*f)
}

func (v *validator) params(r *paramsFile, w *Workload, p []any) Params {
	at := func(k string) []any { return append(append([]any{}, p...), k) }
	for _, k := range r.set() {
		if allowed := behaviourParams[w.Behaviour]; !contains(allowed, k) {
			v.failf(at(k), "not a parameter of behaviour %s (it takes %s)", w.Behaviour, strings.Join(allowed, ", "))
		}
	}
	def := defaults(w.Behaviour)
	pr := Params{
		Util: orDefault(r.Util, def.Util), MinUtil: orDefault(r.MinUtil, def.MinUtil), MaxUtil: orDefault(r.MaxUtil, def.MaxUtil),
		MemoryGiB: orDefault(r.MemoryGiB, def.MemoryGiB), CPUCores: orDefault(r.CPUCores, def.CPUCores),
		Active: orDefault(r.Active, def.Active), Delay: orDefault(r.Delay, def.Delay),
		StallEvery: orDefault(r.StallEvery, def.StallEvery), Stall: orDefault(r.Stall, def.Stall),
		Period: orDefault(r.Period, def.Period), Phase: orDefault(r.Phase, time.Duration(0)),
		Every: orDefault(r.Every, def.Every), Burst: orDefault(r.Burst, def.Burst),
		OrphanFor: orDefault(r.OrphanFor, time.Duration(0)), Quiet: orDefault(r.Quiet, time.Duration(0)),
	}
	if pr.MinUtil > pr.MaxUtil {
		v.failf(at("min_util"), "min_util %g is above max_util %g", pr.MinUtil, pr.MaxUtil)
	}
	if pr.MemoryGiB < 0 || pr.MemoryGiB > 200 {
		v.failf(at("memory_gib"), "must be between 0 and 200, got %g", pr.MemoryGiB)
	}
	if pr.CPUCores < 0 || pr.CPUCores > 512 {
		v.failf(at("cpu_cores"), "must be between 0 and 512, got %g", pr.CPUCores)
	}
	if pr.Stall >= pr.StallEvery {
		v.failf(at("stall"), "stall %s must be shorter than stall_every %s", pr.Stall, pr.StallEvery)
	}
	if pr.Phase >= pr.Period {
		v.failf(at("phase"), "must be shorter than period %s, got %s", pr.Period, pr.Phase)
	}
	if pr.Burst >= pr.Every {
		v.failf(at("burst"), "burst %s must be shorter than every %s", pr.Burst, pr.Every)
	}
	if r.Quiet != nil && pr.Quiet >= pr.Period {
		v.failf(at("quiet"), "quiet %s must be shorter than period %s", pr.Quiet, pr.Period)
	}
	n := len(w.GPUs)
	pr.IdleGPUs = n / 2
	if r.IdleGPUs != nil {
		pr.IdleGPUs = *r.IdleGPUs
	}
	if w.Behaviour == PartialGPUs {
		if n < 2 {
			v.failf(append(p[:len(p)-1:len(p)-1], "gpus"), "partial_gpus needs at least 2 GPUs")
		} else if pr.IdleGPUs < 1 || pr.IdleGPUs >= n {
			v.failf(at("idle_gpus"), "must be between 1 and %d, got %d", n-1, pr.IdleGPUs)
		}
	}
	return pr
}

// defaults holds each behaviour's parameter defaults.
func defaults(b Behaviour) Params {
	p := Params{
		Util: 95, MemoryGiB: 48, Active: 2 * time.Hour, Delay: 25 * time.Minute,
		StallEvery: 5 * time.Minute, Stall: 40 * time.Second, Period: 24 * time.Hour,
		MinUtil: 12, MaxUtil: 75, CPUCores: 6, Every: 30 * time.Minute, Burst: 6 * time.Minute,
	}
	switch b {
	case BurstyTraining:
		p.Util = 88
	case InferenceDaily:
		p.MemoryGiB, p.CPUCores = 30, 3
	case CPUOnly:
		p.MemoryGiB, p.CPUCores = 0, 12
	case HungCollective:
		p.Active = 90 * time.Minute
		p.CPUCores = 1
	case StuckIdle:
		p.Active = 60 * time.Minute
		p.CPUCores = 0.3
	case IdleNotebook:
		p.Util, p.MemoryGiB, p.Active, p.CPUCores = 45, 6, 20*time.Minute, 0.5
	case Notebook:
		p.Util, p.MemoryGiB, p.CPUCores = 60, 8, 0.5
	case LowUtil:
		p.Util, p.MemoryGiB, p.CPUCores = 14, 5, 2
	}
	return p
}

func (v *validator) fault(r *faultFile, i int, nodes map[string]*Node) (Fault, bool) {
	p := func(k ...any) []any { return append([]any{"faults", i}, k...) }
	mark := len(v.errs)
	f := Fault{Kind: r.Kind, Node: r.Node, GPUs: r.GPUs, XID: r.XID, Count: r.Count, Field: r.Field,
		At: time.Duration(r.At), Duration: orDefault(r.Duration, time.Duration(0)), Every: time.Duration(r.Every),
		Until: orDefault(r.Until, time.Duration(0))}
	if f.Kind == "" {
		v.failf(p(), "kind is required (one of %s)", joinKinds())
		return f, false
	}
	n, ok := nodes[f.Node]
	if !ok {
		v.failf(p("node"), "unknown node %q", f.Node)
		return f, false
	}
	if len(f.GPUs) == 0 {
		for g := 0; g < n.GPUs; g++ {
			f.GPUs = append(f.GPUs, g)
		}
	}
	v.gpuList(f.GPUs, n, p("gpus"))
	if f.At < 0 {
		v.failf(p("at"), "must not be before the origin")
	}
	if f.Every > 0 && f.Every < time.Second {
		v.failf(p("every"), "must be at least 1s")
	}
	if r.Until != nil && f.Until < f.At {
		v.failf(p("until"), "must be after at")
	}
	if f.Kind.windowed() && f.Every > 0 && (f.Duration == 0 || f.Duration >= f.Every) {
		v.failf(p("duration"), "a recurring %s needs a duration shorter than every", f.Kind)
	}
	if !f.Kind.windowed() && r.Duration != nil && f.Kind != RowRemapFailure && f.Kind != ECCDBE {
		v.failf(p("duration"), "%s is a point event: use every for recurrence", f.Kind)
	}
	if f.Kind == XID {
		if f.XID < 1 || f.XID > 1000 {
			v.failf(p("xid"), "an XID code between 1 and 1000 is required")
		}
	} else if r.XID != 0 {
		v.failf(p("xid"), "only for kind xid")
	}
	if f.Kind == FieldError {
		if _, ok := fieldMetrics[f.Field]; !ok {
			v.failf(p("field"), "unknown field %q (known: %s)", r.Field, strings.Join(FieldNames(), ", "))
		}
	} else if r.Field != "" {
		v.failf(p("field"), "only for kind field_error")
	}
	if f.Count == 0 {
		f.Count = 1
	}
	if f.Count < 0 || f.Count > 1_000_000 {
		v.failf(p("count"), "must be between 1 and 1000000")
	}
	return f, v.clean(mark)
}

func joinKinds() string {
	names := make([]string, len(faultKinds))
	for i, k := range faultKinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// overlaps refuses two workloads holding the same GPU at the same time,
// unless both are shared (time-slicing replicas): the ground truth of an
// allocation must be unambiguous.
func (v *validator) overlaps(sc *Scenario) {
	type span struct {
		s, e time.Duration
		i    int
	}
	byGPU := map[string][]span{}
	ids := map[string]int{}
	for i := range sc.Workloads {
		w := &sc.Workloads[i]
		// (node, job) names an allocation in findings and expectations: keep it unique.
		if j, dup := ids[w.Node+"\x00"+w.ID]; dup {
			v.failf(path("workloads", i, "id"), "job %s already runs on %s (workloads[%d]); ids are unique per node", w.ID, w.Node, j)
			return
		}
		ids[w.Node+"\x00"+w.ID] = i
		if sc.Repeat > 0 && w.End-w.Start > sc.Repeat {
			v.failf(path("workloads", i, "end"), "runs longer than repeat (%s)", sc.Repeat)
			return
		}
		for _, key := range w.deviceKeys() {
			byGPU[key] = append(byGPU[key], span{w.Start, w.End, i})
		}
	}
	keys := make([]string, 0, len(byGPU))
	for k := range byGPU {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		spans := byGPU[k]
		for a := 0; a < len(spans); a++ {
			for b := a + 1; b < len(spans); b++ {
				x, y := spans[a], spans[b]
				if sc.Workloads[x.i].Shared && sc.Workloads[y.i].Shared {
					continue // replicas of a time-sliced GPU
				}
				shifts := []time.Duration{0}
				if sc.Repeat > 0 {
					shifts = append(shifts, -sc.Repeat, sc.Repeat)
				}
				for _, sh := range shifts {
					if x.s < y.e+sh && y.s+sh < x.e {
						v.failf(path("workloads", y.i, "gpus"), "%s overlaps workload %s on %s",
							sc.Workloads[y.i].ID, sc.Workloads[x.i].ID, k)
						return
					}
				}
			}
		}
	}
}
