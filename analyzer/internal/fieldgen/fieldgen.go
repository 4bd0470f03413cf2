// Package fieldgen writes GPU telemetry the way fleets produce it, for a
// corpus that is not the analyzer's mirror. It shares nothing with
// exporter/sim: its workloads are shapes seen in the field (ramps, train
// and eval phases, checkpoints, input-bound steps, bursty inference, CUDA
// images that fell back to the CPU, hung collectives, notebooks left open),
// with noise on every signal, jitter in every scrape time, exporter
// restarts that reset counters, and per-target scrape intervals. It writes
// dcgm-exporter's series as dcgm-exporter names them (its 3.x default
// counters, or the 4.x DCP set, which has no SM_ACTIVE), through the
// labels Prometheus gives them.
//
// What counts as waste in a case is written on the case (Label) from the
// field's definitions, cited there, never from gpuwatch's thresholds: each
// Corpus case sits well inside or well outside what the field calls
// waste; Borderline holds the cases placed near gpuwatch's thresholds.
package fieldgen

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/analyzer/features"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Model is a GPU model as dcgm-exporter's modelName label spells it.
type Model struct {
	Name      string
	MemoryMiB float64
	IdleW     float64
	TDPW      float64
}

// The models the corpus' nodes have.
var (
	A100 = Model{Name: "NVIDIA A100-SXM4-80GB", MemoryMiB: 81920, IdleW: 58, TDPW: 400}
	H100 = Model{Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, IdleW: 72, TDPW: 700}
)

// Node is one GPU node and its exporter's scrape target.
type Node struct {
	Host  string
	Model Model
	GPUs  int
	// Interval is the target's scrape interval; every scrape time is
	// jittered by up to ±4 % of it, as Prometheus' scrape offsets and a
	// slow exporter make them.
	Interval time.Duration
	// Cluster is the value of the cluster label a shared Prometheus adds
	// ("" for none).
	Cluster string
}

// Holder is who holds a GPU as the exporter's attribution writes it: a
// Slurm job (hpc_job) or a pod.
type Holder struct {
	Slurm                     string
	Namespace, Pod, Container string
}

// Job is the holder as the analyzer names it.
func (h Holder) Job() string {
	if h.Slurm != "" {
		return h.Slurm
	}
	return h.Namespace + "/" + h.Pod
}

// Label is one waste the field would call a case, and its GPU-hours.
type Label struct {
	Pattern  schema.Pattern
	GPUHours float64
}

// Reading is one GPU's state at one scrape.
type Reading struct {
	Util, MemCopy, FBUsedMiB, PowerW, GrActive, Tensor, DRAM float64
	// SM is SM activity; 0 reads as nine tenths of GrActive (a warp on
	// an SM is the graphics engine active, not every SM carries one).
	SM float64
}

// Shape gives a GPU's reading at offset t into its work; gpu is the index
// of the GPU in the work's list.
type Shape func(rng *rand.Rand, t time.Duration, gpu int, m Model) Reading

// Work is one allocation of the corpus.
type Work struct {
	Case   string // what the case is, for people
	Node   string
	GPUs   []int
	Holder Holder
	Start  time.Duration
	End    time.Duration
	Shape  Shape
	// Waste is what the field calls waste in it (nil: none); Also lists
	// patterns that would be a fair reading of the same case as well (a
	// notebook never used is both idle and CPU-only), neither required
	// nor counted false.
	Waste []Label
	Also  []schema.Pattern
	// Why cites the field's definition the labels follow.
	Why string
	// Pins names the detector thresholds this case's reading sits near
	// (a configuration key, e.g. "idle.util_percent") and the reading in
	// the threshold's unit (a duration in nanoseconds): the borderline site
	// has, for each threshold, a case just below it and one just above,
	// within a quarter of it, so that moving it 25 % changes a finding.
	// The reading is the case's; which side it is on is the analyzer's
	// business, what the case is (Waste) the cited source's.
	Pins []Pin
	// Profiling: the case can be told apart only with SM and DRAM
	// activity (Format.SM); Site.For leaves it out of formats without
	// them, where its telemetry reads as another case's.
	Profiling bool
}

// Pin is one threshold a case's reading sits near.
type Pin struct {
	Key string
	At  float64
}

// Site is the corpus: nodes, work and the span it covers.
type Site struct {
	Nodes []Node
	Work  []Work
	Span  time.Duration
}

// Format is how the series reach the store.
type Format struct {
	// DCP: dcgm-exporter 4.x's DCP counters (graphics engine, tensor and
	// DRAM activity; no SM_ACTIVE) beside the default ones.
	DCP bool
	// SM: SM activity too (dcgm-exporter's dcp-metrics-included.csv, the
	// profiling set with DCGM_FI_PROF_SM_ACTIVE); it implies DCP.
	SM bool
	// Exporter names the exporter's own pod on a node (pod, namespace,
	// container) in a restart epoch; nil: no exporter pod on the series.
	Exporter func(host string, epoch int) (pod, namespace, container string)
	// HonorLabelsFalse: Prometheus renames the holder's pod, namespace
	// and container to exported_* and writes the exporter's own; without
	// it, the exporter's labels are on the series of free GPUs only (the
	// series carries no holder there, so the target's labels stay).
	HonorLabelsFalse bool
	// Restart is how often each node's exporter restarts (a new pod, its
	// energy counter from 0); 0: never.
	Restart time.Duration
	// Interval, when set, overrides every node's scrape interval (the
	// one-interval twin of a mixed store).
	Interval time.Duration
}

// For is the site as format f carries it: without the cases that need
// counters f lacks.
func (s *Site) For(f Format) *Site {
	out := *s
	out.Work = nil
	for _, w := range s.Work {
		if w.Profiling && !f.SM {
			continue
		}
		out.Work = append(out.Work, w)
	}
	return &out
}

// Sink receives one target's families at one scrape time, in time order.
type Sink func(ts time.Time, fams []*dto.MetricFamily) error

type scrape struct {
	at   time.Duration
	node int
}

// Replay writes the site from origin at each node's own cadence.
func (s *Site) Replay(origin time.Time, seed uint64, f Format, sink Sink) error {
	// One random source per node: a node scraped alike in two formats
	// gives the same readings in both, whatever the other nodes do.
	rngs := make([]*rand.Rand, len(s.Nodes))
	var scrapes []scrape
	for i, n := range s.Nodes {
		h := fnv.New64a()
		h.Write([]byte(n.Host))
		rngs[i] = rand.New(rand.NewPCG(seed, h.Sum64()))
		rng := rngs[i]
		iv := n.Interval
		if f.Interval > 0 {
			iv = f.Interval
		}
		if iv <= 0 {
			return fmt.Errorf("node %s: no scrape interval", n.Host)
		}
		offset := time.Duration(rng.Int64N(int64(iv)))
		for t := offset; t < s.Span; t += iv {
			jitter := time.Duration((rng.Float64()*2 - 1) * 0.04 * float64(iv))
			if at := t + jitter; at > 0 && at < s.Span {
				scrapes = append(scrapes, scrape{at.Truncate(time.Millisecond), i})
			}
		}
	}
	sort.SliceStable(scrapes, func(a, b int) bool { return scrapes[a].at < scrapes[b].at })
	energy := make([][]float64, len(s.Nodes))
	lastEpoch := make([]int, len(s.Nodes))
	for i, n := range s.Nodes {
		energy[i] = make([]float64, n.GPUs)
	}
	last := make([]time.Duration, len(s.Nodes))
	for _, sc := range scrapes {
		n, rng := s.Nodes[sc.node], rngs[sc.node]
		epoch := 0
		if f.Restart > 0 {
			epoch = int(sc.at / f.Restart)
		}
		if epoch != lastEpoch[sc.node] {
			lastEpoch[sc.node] = epoch
			for g := range energy[sc.node] {
				energy[sc.node][g] = 0
			}
		}
		fams := newFamilies(f)
		for g := 0; g < n.GPUs; g++ {
			w, k := s.holding(n.Host, g, sc.at)
			var r Reading
			if w == nil {
				r = idle(rng, n.Model)
			} else {
				r = w.Shape(rng, sc.at-w.Start, k, n.Model)
			}
			r = clamp(r, n.Model)
			if last[sc.node] > 0 {
				energy[sc.node][g] += r.PowerW * (sc.at - last[sc.node]).Seconds() * 1000
			}
			ls := s.labels(n, g, w, f, epoch)
			fams.add(r, energy[sc.node][g], ls, n.Model)
		}
		last[sc.node] = sc.at
		if err := sink(origin.Add(sc.at), fams.list()); err != nil {
			return err
		}
	}
	return nil
}

// holding is the work on host's GPU g at t, and the GPU's index in it.
func (s *Site) holding(host string, g int, t time.Duration) (*Work, int) {
	for i := range s.Work {
		w := &s.Work[i]
		if w.Node != host || t < w.Start || t >= w.End {
			continue
		}
		for k, x := range w.GPUs {
			if x == g {
				return w, k
			}
		}
	}
	return nil, 0
}

func uuid(host string, g int) string {
	h := fnv.New128a()
	fmt.Fprintf(h, "%s/%d", host, g)
	b := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (s *Site) labels(n Node, g int, w *Work, f Format, epoch int) [][2]string {
	ls := [][2]string{
		{schema.LabelGPU, fmt.Sprint(g)}, {schema.LabelUUID, uuid(n.Host, g)}, {schema.LabelDevice, fmt.Sprintf("nvidia%d", g)},
		{schema.LabelModelName, n.Model.Name}, {schema.LabelOldHost, n.Host}, {schema.LabelPCIBusID, fmt.Sprintf("00000000:%02X:00.0", 0x07+0x10*g)},
		{"DCGM_FI_DRIVER_VERSION", "550.90.07"}, {"instance", n.Host + ":9400"}, {"job", "dcgm-exporter"},
	}
	if n.Cluster != "" {
		ls = append(ls, [2]string{"cluster", n.Cluster})
	}
	var holder [][2]string
	if w != nil {
		h := w.Holder
		if h.Slurm != "" {
			holder = append(holder, [2]string{schema.LabelHPCJob, h.Slurm})
		} else {
			holder = append(holder, [2]string{schema.LabelPod, h.Pod}, [2]string{schema.LabelNamespace, h.Namespace}, [2]string{schema.LabelContainer, h.Container})
		}
	}
	var target [][2]string
	if f.Exporter != nil {
		if pod, ns, ctr := f.Exporter(n.Host, epoch); pod != "" {
			target = [][2]string{{schema.LabelPod, pod}, {schema.LabelNamespace, ns}, {schema.LabelContainer, ctr}}
		}
	}
	switch {
	case f.HonorLabelsFalse:
		for _, l := range holder {
			if l[0] != schema.LabelHPCJob {
				l[0] = features.ExportedPrefix + l[0]
			}
			ls = append(ls, l)
		}
		ls = append(ls, target...)
	case len(holder) > 0 && holder[0][0] != schema.LabelHPCJob:
		ls = append(ls, holder...)
	default:
		ls = append(ls, holder...)
		ls = append(ls, target...)
	}
	return ls
}

func noise(rng *rand.Rand, sd float64) float64 { return rng.NormFloat64() * sd }

// idle is a free GPU: a few percent of util at most from the driver's own
// housekeeping, a board-specific idle draw, no memory in use.
func idle(rng *rand.Rand, m Model) Reading {
	u := 0.0
	if rng.IntN(20) == 0 {
		u = 1
	}
	return Reading{Util: u, FBUsedMiB: 0, PowerW: m.IdleW + noise(rng, 2)}
}

func clamp(r Reading, m Model) Reading {
	c := func(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
	r.Util = math.Round(c(r.Util, 0, 100))
	r.MemCopy = math.Round(c(r.MemCopy, 0, 100))
	r.FBUsedMiB = math.Round(c(r.FBUsedMiB, 0, m.MemoryMiB-512))
	r.PowerW = math.Round(c(r.PowerW, m.IdleW*0.8, m.TDPW)*1000) / 1000
	r.GrActive, r.Tensor, r.DRAM, r.SM = c(r.GrActive, 0, 1), c(r.Tensor, 0, 1), c(r.DRAM, 0, 1), c(r.SM, 0, 1)
	return r
}

type families struct {
	dcp  bool
	sm   bool
	byID map[string]*dto.MetricFamily
	ids  []string
}

func newFamilies(f Format) *families {
	return &families{dcp: f.DCP || f.SM, sm: f.SM, byID: map[string]*dto.MetricFamily{}}
}

func (fs *families) put(name string, counter bool, v float64, ls [][2]string) {
	mf := fs.byID[name]
	if mf == nil {
		t := dto.MetricType_GAUGE
		if counter {
			t = dto.MetricType_COUNTER
		}
		mf = &dto.MetricFamily{Name: proto.String(name), Type: t.Enum()}
		fs.byID[name] = mf
		fs.ids = append(fs.ids, name)
	}
	m := &dto.Metric{}
	for _, l := range ls {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(l[0]), Value: proto.String(l[1])})
	}
	if counter {
		m.Counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		m.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	mf.Metric = append(mf.Metric, m)
}

// add writes one GPU's reading as dcgm-exporter's default counters (and
// the DCP ones where asked).
func (fs *families) add(r Reading, energyMJ float64, ls [][2]string, m Model) {
	fs.put(schema.GPUUtil.Name, false, r.Util, ls)
	fs.put(schema.MemCopyUtil.Name, false, r.MemCopy, ls)
	fs.put(schema.FBUsed.Name, false, r.FBUsedMiB, ls)
	fs.put(schema.FBFree.Name, false, m.MemoryMiB-512-r.FBUsedMiB, ls)
	fs.put(schema.PowerUsage.Name, false, r.PowerW, ls)
	fs.put(schema.TotalEnergy.Name, true, math.Round(energyMJ), ls)
	fs.put(schema.SMClock.Name, false, 1410, ls)
	fs.put(schema.XIDLast.Name, false, 0, ls)
	if fs.dcp {
		fs.put(schema.ProfGrEngineActive.Name, false, r.GrActive, ls)
		fs.put(schema.ProfTensorActive.Name, false, r.Tensor, ls)
		fs.put(schema.ProfDRAMActive.Name, false, r.DRAM, ls)
	}
	if fs.sm {
		sm := r.SM
		if sm == 0 {
			sm = 0.9 * r.GrActive
		}
		fs.put(schema.ProfSMActive.Name, false, sm, ls)
	}
}

func (fs *families) list() []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, 0, len(fs.ids))
	for _, id := range fs.ids {
		out = append(out, fs.byID[id])
	}
	return out
}
