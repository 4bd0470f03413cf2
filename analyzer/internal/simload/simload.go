// Package simload replays a simulator scenario into metric families, as the
// exporter would publish them, for the analyzer's tests and benchmarks: into
// the embedded TSDB, into OpenMetrics text for promtool's backfill, and in
// the stock dcgm-exporter form (no gpuwatch_* series, the older Hostname
// label, optionally without profiling or power fields).
package simload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/exporter/collector"
	"github.com/gpuwatch/gpuwatch/exporter/sim"
	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// Clock is a settable clock for the simulator.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now implements source.Clock.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set moves the clock.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// Format of the replayed series.
type Format struct {
	// Stock drops gpuwatch_* series and labels hosts Hostname, as older
	// dcgm-exporter releases do.
	Stock bool
	// NoProf drops DCGM_FI_PROF_*; NoPower drops power usage and limit.
	NoProf, NoPower bool
	// Counters, when set, keeps exactly these families: a dcgm-exporter
	// counter set (DCGMDefault, DCGMDCP).
	Counters []*schema.Metric
	// Host names the label carrying the node: "" keeps gpuwatch's hostname
	// (Hostname when Stock), "instance" leaves only the scrape target.
	Host string
	// HonorLabelsFalse renames the holder labels to exported_* and sets
	// pod, namespace and container to the exporter's own pod, as Prometheus
	// does with honor_labels: false; the exporter pod is renamed every
	// ExporterRestart (a DaemonSet pod replaced on upgrade or crash).
	HonorLabelsFalse bool
	ExporterRestart  time.Duration
	// ExporterPod names the exporter's own pod on a node in one restart
	// epoch, as the scrape target's labels carry it; nil is the GPU
	// Operator's nvidia-dcgm-exporter. TargetLabelsOnFreeGPUs puts those
	// labels on the series of unallocated GPUs also when honor_labels is
	// true (dcgm-exporter writes no holder there, so Prometheus keeps the
	// target's), leaving allocated GPUs with the workload's.
	ExporterPod            func(host string, epoch int64) (pod, namespace, container string)
	TargetLabelsOnFreeGPUs bool
	// Interval thins the scrapes to one per Interval (e.g. 60s).
	Interval time.Duration
	// HostIntervals thins each listed node's scrapes to its own interval:
	// targets scraped at different intervals in one store.
	HostIntervals map[string]time.Duration
	// Outages are windows with no scrape at all (an exporter down).
	Outages []Window
}

// Window is [From, To) as offsets from the Unix epoch-aligned origin.
type Window struct{ From, To time.Time }

// Sink wraps next so that it receives the families in this format.
func (f Format) Sink(next Sink) Sink {
	return func(t time.Time, fams []*dto.MetricFamily) error {
		if f.Interval > 0 && t.UnixMilli()%f.Interval.Milliseconds() != 0 {
			return nil
		}
		for _, w := range f.Outages {
			if !t.Before(w.From) && t.Before(w.To) {
				return nil
			}
		}
		out := make([]*dto.MetricFamily, 0, len(fams))
		for _, mf := range fams {
			if mf = f.apply(t, mf); mf != nil {
				out = append(out, mf)
			}
		}
		return next(t, out)
	}
}

func (f Format) keeps(name string) bool {
	if f.Counters == nil {
		return true
	}
	for _, m := range f.Counters {
		if m.Name == name {
			return true
		}
	}
	return false
}

// Read are the families the analyzer queries.
var Read = []*schema.Metric{schema.GPUUtil, schema.MemCopyUtil, schema.FBUsed, schema.FBFree, schema.PowerUsage,
	schema.PowerLimit, schema.ProfSMActive, schema.ProfDRAMActive, schema.ProfGrEngineActive, schema.ProfTensorActive,
	schema.AllocationInfo, schema.ProcessOrphaned,
	// a shared device's holders' own use (analyzer/features/holders.go)
	schema.HolderSMUtil, schema.HolderMemory,
	// health signals (analyzer/features/health.go)
	schema.ClockEvents, schema.SMClock, schema.PowerViolation, schema.ThermViolation,
	schema.XIDErrors, schema.XIDLast, schema.ECCDBEVol, schema.RemapUncorr, schema.RemapFailure, schema.PCIeReplay}

// Options of a replay.
type Options struct {
	Seed int64
	// Origin of the scenario (required when the scenario has none).
	Origin time.Time
	// From and To are offsets from the origin; Resolution the scrape interval.
	From, To   time.Duration
	Resolution time.Duration
	// All keeps every family; by default only those the analyzer reads are
	// rendered, which keeps replays of a simulated week fast.
	All bool
	// Extra families to render besides Read (the job view also reads energy
	// and the jobs' CPU time).
	Extra []*schema.Metric
}

// Sink receives each collection of the whole fleet.
type Sink func(t time.Time, fams []*dto.MetricFamily) error

// Replay runs the scenario and hands every collection to sink. It returns
// the source's origin.
func Replay(ctx context.Context, sc *sim.Scenario, o Options, sink Sink) (time.Time, error) {
	clock := &Clock{}
	clock.Set(o.Origin)
	src, err := sim.New(sc, sim.Options{Seed: o.Seed, Clock: clock, Origin: o.Origin})
	if err != nil {
		return time.Time{}, fmt.Errorf("replay %s: %w", sc.Name, err)
	}
	defer src.Close()
	origin := src.Origin()
	keep := map[string]bool{}
	for _, m := range append(append([]*schema.Metric{}, Read...), o.Extra...) {
		keep[m.Name] = true
	}
	for off := o.From; off <= o.To; off += o.Resolution {
		if err := ctx.Err(); err != nil {
			return origin, err
		}
		t := origin.Add(off)
		clock.Set(t)
		snaps, err := src.CollectAll(ctx)
		if err != nil {
			return origin, fmt.Errorf("replay %s at %s: %w", sc.Name, off, err)
		}
		var fams []*dto.MetricFamily
		for _, s := range snaps {
			if !o.All {
				trim(s, keep)
			}
			for _, f := range collector.Render(s) {
				if o.All || keep[f.GetName()] {
					fams = append(fams, f)
				}
			}
		}
		if err := sink(t, fams); err != nil {
			return origin, err
		}
	}
	return origin, nil
}

// trim drops what the analyzer does not read before rendering, which is
// most of a snapshot's samples.
func trim(s *source.Snapshot, keep map[string]bool) {
	for i := range s.Devices {
		d := &s.Devices[i]
		kept := d.Samples[:0]
		for _, x := range d.Samples {
			if keep[x.Metric.Name] {
				kept = append(kept, x)
			}
		}
		d.Samples = kept
		d.Capabilities = nil
	}
	// Orphans are read; so is each process's own use on a device that
	// publishes it, summed per holder (gpuwatch_holder_*).
	ownUse := map[string]bool{}
	if keep[schema.HolderSMUtil.Name] || keep[schema.HolderMemory.Name] {
		for i := range s.Devices {
			if s.Devices[i].ProcessUse {
				ownUse[s.Devices[i].Key()] = true
			}
		}
	}
	procs := s.Processes[:0]
	for _, p := range s.Processes {
		if p.Orphan || ownUse[p.DeviceKey] {
			procs = append(procs, p)
		}
	}
	s.Processes = procs
	if !keep[schema.JobCPUSeconds.Name] {
		s.JobCPU = nil
	}
}

func (f Format) apply(t time.Time, mf *dto.MetricFamily) *dto.MetricFamily {
	name := mf.GetName()
	switch {
	case !f.keeps(name):
		return nil
	case f.Stock && strings.HasPrefix(name, "gpuwatch_"):
		return nil
	case f.NoProf && strings.HasPrefix(name, "DCGM_FI_PROF_"):
		return nil
	case f.NoPower && (name == schema.PowerUsage.Name || name == schema.PowerLimit.Name):
		return nil
	}
	if !f.Stock && f.Host == "" && !f.HonorLabelsFalse && f.HostIntervals == nil && !f.TargetLabelsOnFreeGPUs {
		return mf
	}
	hostLabel := f.Host
	if hostLabel == "" && f.Stock {
		hostLabel = schema.LabelOldHost
	}
	// The families are shared by every sink of a replay and read by them
	// concurrently (Fanout), so the changed metrics and label pairs are new
	// and the rest (values, unchanged pairs) is shared, never written.
	out := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type, Unit: mf.Unit}
	metrics := make([]*dto.Metric, 0, len(mf.Metric))
	for _, src := range mf.Metric {
		host, held := "", false
		for _, l := range src.Label {
			switch l.GetName() {
			case schema.LabelHostname:
				host = l.GetValue()
			case schema.LabelPod, schema.LabelHPCJob:
				held = true
			}
		}
		if iv := f.HostIntervals[host]; iv > 0 && t.UnixMilli()%iv.Milliseconds() != 0 {
			continue
		}
		metrics = append(metrics, f.relabel(t, src, host, held, hostLabel))
	}
	out.Metric = metrics
	if len(out.Metric) == 0 {
		return nil
	}
	return out
}

// relabel returns src as this format's exporter and scrape would label it
// on the host that holds it.
func (f Format) relabel(t time.Time, src *dto.Metric, host string, held bool, hostLabel string) *dto.Metric {
	m := &dto.Metric{Gauge: src.Gauge, Counter: src.Counter, Summary: src.Summary, Untyped: src.Untyped,
		Histogram: src.Histogram, TimestampMs: src.TimestampMs, Label: make([]*dto.LabelPair, 0, len(src.Label)+4)}
	for _, l := range src.Label {
		switch l.GetName() {
		case schema.LabelHostname:
			switch hostLabel {
			case "instance":
				continue
			case "", schema.LabelHostname:
			default:
				l = &dto.LabelPair{Name: proto.String(hostLabel), Value: l.Value}
			}
		case schema.LabelPod, schema.LabelNamespace, schema.LabelContainer:
			if f.HonorLabelsFalse {
				l = &dto.LabelPair{Name: proto.String("exported_" + l.GetName()), Value: l.Value}
			}
		}
		m.Label = append(m.Label, l)
	}
	if hostLabel == "instance" || f.HonorLabelsFalse {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String("instance"), Value: proto.String(host + ":9400")})
	}
	if f.HonorLabelsFalse || (f.TargetLabelsOnFreeGPUs && !held) {
		epoch := int64(0)
		if f.ExporterRestart > 0 {
			epoch = t.UnixMilli() / f.ExporterRestart.Milliseconds()
		}
		pod, ns, container := fmt.Sprintf("nvidia-dcgm-exporter-%s-%x", host, epoch%4096), "gpu-operator", "nvidia-dcgm-exporter"
		if f.ExporterPod != nil {
			pod, ns, container = f.ExporterPod(host, epoch)
		}
		m.Label = append(m.Label,
			&dto.LabelPair{Name: proto.String(schema.LabelPod), Value: proto.String(pod)},
			&dto.LabelPair{Name: proto.String(schema.LabelNamespace), Value: proto.String(ns)},
			&dto.LabelPair{Name: proto.String(schema.LabelContainer), Value: proto.String(container)})
	}
	sort.Slice(m.Label, func(i, j int) bool { return m.Label[i].GetName() < m.Label[j].GetName() })
	return m
}

// OpenMetrics writes replayed collections as one OpenMetrics file, which
// `promtool tsdb create-blocks-from openmetrics` backfills into a real
// Prometheus. OpenMetrics wants each family's samples together, so each
// family is spooled to its own file and they are joined at Close.
type OpenMetrics struct {
	dir   string
	files map[string]*bufio.Writer
	raw   map[string]*os.File
	order []string
}

// NewOpenMetrics spools into dir.
func NewOpenMetrics(dir string) *OpenMetrics {
	return &OpenMetrics{dir: dir, files: map[string]*bufio.Writer{}, raw: map[string]*os.File{}}
}

// Sink writes one collection.
func (w *OpenMetrics) Sink(t time.Time, fams []*dto.MetricFamily) error {
	ts := strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
	for _, f := range fams {
		name := f.GetName()
		bw, ok := w.files[name]
		if !ok {
			fh, err := os.Create(filepath.Join(w.dir, "family-"+name+".om"))
			if err != nil {
				return fmt.Errorf("spool %s: %w", name, err)
			}
			bw = bufio.NewWriterSize(fh, 1<<16)
			w.files[name], w.raw[name] = bw, fh
			w.order = append(w.order, name)
			// Everything is written as a gauge: counters would need the
			// _total suffix OpenMetrics demands, and the analyzer reads none.
			fmt.Fprintf(bw, "# TYPE %s gauge\n", name)
		}
		for _, m := range f.Metric {
			bw.WriteString(name)
			ls := m.GetLabel()
			if len(ls) > 0 {
				bw.WriteByte('{')
				for i, l := range ls {
					if i > 0 {
						bw.WriteByte(',')
					}
					bw.WriteString(l.GetName())
					bw.WriteString(`="`)
					bw.WriteString(Escape(l.GetValue()))
					bw.WriteByte('"')
				}
				bw.WriteByte('}')
			}
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			bw.WriteByte(' ')
			bw.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
			bw.WriteByte(' ')
			bw.WriteString(ts)
			bw.WriteByte('\n')
		}
	}
	return nil
}

// Close joins the spooled families into path, ending with # EOF.
func (w *OpenMetrics) Close(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write openmetrics: %w", err)
	}
	defer out.Close()
	sort.Strings(w.order)
	for _, name := range w.order {
		if err := w.files[name].Flush(); err != nil {
			return fmt.Errorf("spool %s: %w", name, err)
		}
		fh := w.raw[name]
		if _, err := fh.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("spool %s: %w", name, err)
		}
		if _, err := io.Copy(out, fh); err != nil {
			return fmt.Errorf("spool %s: %w", name, err)
		}
		fh.Close()
		os.Remove(fh.Name())
	}
	if _, err := io.WriteString(out, "# EOF\n"); err != nil {
		return fmt.Errorf("write openmetrics: %w", err)
	}
	return out.Close()
}

// labelEscaper is built once: a strings.Replacer builds its tables on first
// use, which per label value costs more than the replay it serves.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Escape quotes a label value for the text exposition formats.
func Escape(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return labelEscaper.Replace(s)
}
