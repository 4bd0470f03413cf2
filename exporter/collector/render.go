package collector

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// MaxLabelValueBytes bounds every label value the exporter writes. Job names,
// commands and user names come from users; Prometheus' label_value_length_limit
// fails a whole scrape on one long value, so values are cut (on a UTF-8
// boundary, ending in "…") and counted in
// gpuwatch_exporter_label_values_truncated_total. A joined list of holders of
// a shared GPU keeps whole ids and ends in ",+N" for the N left out.
const MaxLabelValueBytes = 512

// Render turns a snapshot into metric families, in catalogue order. GPU series
// carry the contract's labels; allocation labels appear only while a device is
// allocated (an empty label is an absent label to Prometheus, so we leave it out).
func Render(snap *source.Snapshot) []*dto.MetricFamily {
	mfs, _ := RenderCounting(snap)
	return mfs
}

// RenderCounting is Render that also returns how many label values it cut,
// by label name.
func RenderCounting(snap *source.Snapshot) ([]*dto.MetricFamily, RenderStats) {
	r := renderer{families: map[*schema.Metric]*dto.MetricFamily{}, truncated: map[string]int{}}
	r.render(snap)
	out := make([]*dto.MetricFamily, 0, len(r.families))
	for _, m := range schema.All() {
		if mf, ok := r.families[m]; ok {
			out = append(out, mf)
		}
	}
	return out, RenderStats{Truncated: r.truncated, HoldersDropped: r.holdersDropped}
}

// RenderStats says what a rendering left out to stay bounded.
type RenderStats struct {
	// Truncated counts label values cut, by label name.
	Truncated map[string]int
	// HoldersDropped counts holders past MaxHoldersPerDevice, over all devices.
	HoldersDropped int
}

type renderer struct {
	families       map[*schema.Metric]*dto.MetricFamily
	truncated      map[string]int
	holdersDropped int
}

func (r *renderer) family(m *schema.Metric) *dto.MetricFamily {
	mf, ok := r.families[m]
	if !ok {
		t := dto.MetricType_GAUGE
		if m.Type == schema.Counter {
			t = dto.MetricType_COUNTER
		}
		mf = &dto.MetricFamily{Name: proto.String(m.Name), Help: proto.String(m.Help), Type: t.Enum()}
		r.families[m] = mf
	}
	return mf
}

func (r *renderer) add(m *schema.Metric, labels []*dto.LabelPair, v float64) {
	mf := r.family(m)
	metric := &dto.Metric{Label: labels}
	if m.Type == schema.Counter {
		metric.Counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		metric.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	mf.Metric = append(mf.Metric, metric)
}

func (r *renderer) pair(name, value string) *dto.LabelPair {
	if len(value) > MaxLabelValueBytes {
		value = truncate(value, MaxLabelValueBytes)
		r.truncated[name]++
	}
	return &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
}

// truncate cuts s to at most limit bytes on a rune boundary, ending in "…".
func truncate(s string, limit int) string {
	const ellipsis = "…"
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

// joinCapped joins sorted ids with commas within MaxLabelValueBytes: whole
// ids only, then ",+N" for the N that did not fit.
func (r *renderer) joinCapped(name string, ids []string) string {
	joined := strings.Join(ids, ",")
	if len(joined) <= MaxLabelValueBytes {
		return joined
	}
	r.truncated[name]++
	var b strings.Builder
	for i, id := range ids {
		// Room for this id and the count of those after it.
		if b.Len()+1+len(id)+len(",+"+strconv.Itoa(len(ids)-i-1)) > MaxLabelValueBytes {
			if b.Len() == 0 {
				return "+" + strconv.Itoa(len(ids))
			}
			return b.String() + ",+" + strconv.Itoa(len(ids)-i)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(id)
	}
	return b.String()
}

// identityLabels name the device: the labels every series of it carries.
func (r *renderer) identityLabels(hostname string, d *source.Device) []*dto.LabelPair {
	l := make([]*dto.LabelPair, 0, 12)
	l = append(l,
		r.pair(schema.LabelGPU, strconv.Itoa(d.Index)),
		r.pair(schema.LabelUUID, d.UUID),
		r.pair(schema.LabelPCIBusID, d.PCIBusID),
		r.pair(schema.LabelDevice, "nvidia"+strconv.Itoa(d.Index)),
		r.pair(schema.LabelModelName, d.Model),
		r.pair(schema.LabelHostname, hostname),
	)
	if d.MIG != nil {
		l = append(l, r.pair(schema.LabelGIProfile, d.MIG.Profile), r.pair(schema.LabelGIID, strconv.Itoa(d.MIG.GIID)))
	}
	return l
}

// deviceLabels are the labels of a device's telemetry series: its identity
// and, while allocated, its holders.
func (r *renderer) deviceLabels(identity []*dto.LabelPair, alloc []source.Allocation) []*dto.LabelPair {
	l := append([]*dto.LabelPair(nil), identity...)
	if len(alloc) > 0 {
		// A shared GPU (time-slicing, MPS) has several holders: the GPU series
		// name them all, joined, so the series is not duplicated per holder.
		var pods, nss, ctrs, jobs []string
		for _, a := range alloc {
			pods = appendUnique(pods, a.Pod)
			nss = appendUnique(nss, a.Namespace)
			ctrs = appendUnique(ctrs, a.Container)
			jobs = appendUnique(jobs, a.HPCJob)
		}
		for _, kv := range []struct {
			name string
			vals []string
		}{{schema.LabelPod, pods}, {schema.LabelNamespace, nss}, {schema.LabelContainer, ctrs}, {schema.LabelHPCJob, jobs}} {
			if len(kv.vals) > 0 {
				sort.Strings(kv.vals)
				l = append(l, &dto.LabelPair{Name: proto.String(kv.name), Value: proto.String(r.joinCapped(kv.name, kv.vals))})
			}
		}
	}
	return l
}

// holderLabels are one holder's own allocation labels, for its
// allocation_info series: never the joined list of every holder, so the
// series stay linear in the number of holders.
func (r *renderer) holderLabels(identity []*dto.LabelPair, a *source.Allocation) []*dto.LabelPair {
	return r.with(identity, []string{schema.LabelPod, schema.LabelNamespace, schema.LabelContainer, schema.LabelHPCJob},
		a.Pod, a.Namespace, a.Container, a.HPCJob)
}

// withoutLabel drops one label. gpuwatch_* series leave out dcgm-exporter's
// camelCase modelName so that they follow Prometheus naming without exception
// (promtool check metrics flags camelCase label names); join on gpu and
// hostname to get the model.
func withoutLabel(l []*dto.LabelPair, name string) []*dto.LabelPair {
	out := make([]*dto.LabelPair, 0, len(l))
	for _, p := range l {
		if p.GetName() != name {
			out = append(out, p)
		}
	}
	return out
}

func appendUnique(s []string, v string) []string {
	if v == "" {
		return s
	}
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

func (r *renderer) with(base []*dto.LabelPair, names []string, values ...string) []*dto.LabelPair {
	l := make([]*dto.LabelPair, len(base), len(base)+len(names))
	copy(l, base)
	for i, n := range names {
		v := ""
		if i < len(values) {
			v = values[i]
		}
		if v == "" {
			continue
		}
		l = append(l, r.pair(n, v))
	}
	return l
}

func (r *renderer) render(snap *source.Snapshot) {
	allocs := map[string][]source.Allocation{}
	for _, a := range snap.Allocations {
		allocs[a.DeviceKey] = append(allocs[a.DeviceKey], a)
	}
	var procs map[string][]*source.Process
	for i := range snap.Devices {
		if snap.Devices[i].ProcessUse && snap.Devices[i].Up {
			procs = processesByDevice(snap.Processes)
			break
		}
	}
	base := map[string][]*dto.LabelPair{}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		key := d.Key()
		identity := r.identityLabels(snap.Hostname, d)
		dcgmLabels := r.deviceLabels(identity, allocs[key])
		labels := withoutLabel(dcgmLabels, schema.LabelModelName)
		base[key] = labels
		up := 0.0
		if d.Up {
			up = 1
		}
		r.add(schema.GPUUp, labels, up)
		for _, c := range d.Capabilities {
			r.add(schema.Capabilities, r.with(labels, schema.Capabilities.Labels, c), 1)
		}
		if !d.Up {
			continue
		}
		for _, s := range d.Samples {
			l := labels
			if s.Metric.DCGM {
				l = dcgmLabels
			}
			if len(s.Metric.Labels) == 0 {
				r.add(s.Metric, l, s.Value)
			} else {
				r.add(s.Metric, r.with(l, s.Metric.Labels, s.LabelValues...), s.Value)
			}
		}
		holderBase := withoutLabel(identity, schema.LabelModelName)
		for i := range allocs[key] {
			a := &allocs[key][i]
			attrs := a.Attributes()
			r.add(schema.AllocationInfo, r.with(r.holderLabels(holderBase, a), schema.AllocationInfo.Labels, attrs.InfoLabelValues()...), 1)
		}
		if d.ProcessUse {
			r.holdersDropped += r.renderHolders(holderBase, allocs[key], procs[key])
		}
	}
	for _, p := range snap.Processes {
		labels, ok := base[p.DeviceKey]
		if !ok {
			continue
		}
		pid := strconv.Itoa(p.PID)
		r.add(schema.ProcessMemory, r.with(labels, schema.ProcessMemory.Labels,
			pid, p.Command, p.User, p.Job, string(p.Type)), float64(p.MemoryBytes))
		if p.Orphan {
			r.add(schema.ProcessOrphaned, r.with(labels, schema.ProcessOrphaned.Labels, pid, p.Command, p.User, p.Job), 1)
		}
	}
	for _, j := range snap.JobCPU {
		r.add(schema.JobCPUSeconds, r.with(nil, schema.JobCPUSeconds.Labels, snap.Hostname, j.Job), j.Seconds)
	}
}

// processesByDevice indexes processes by Process.DeviceKey.
func processesByDevice(ps []source.Process) map[string][]*source.Process {
	out := map[string][]*source.Process{}
	for i := range ps {
		out[ps[i].DeviceKey] = append(out[ps[i].DeviceKey], &ps[i])
	}
	return out
}
