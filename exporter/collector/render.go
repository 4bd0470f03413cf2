package collector

import (
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/gpuwatch/gpuwatch/exporter/catalogue"
	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// Render turns a snapshot into metric families, in catalogue order. GPU series
// carry the contract's labels; allocation labels appear only while a device is
// allocated (an empty label is an absent label to Prometheus, so we leave it out).
func Render(snap *source.Snapshot) []*dto.MetricFamily {
	r := renderer{families: map[*catalogue.Metric]*dto.MetricFamily{}}
	r.render(snap)
	out := make([]*dto.MetricFamily, 0, len(r.families))
	for _, m := range catalogue.All() {
		if mf, ok := r.families[m]; ok {
			out = append(out, mf)
		}
	}
	return out
}

type renderer struct {
	families map[*catalogue.Metric]*dto.MetricFamily
}

func (r *renderer) family(m *catalogue.Metric) *dto.MetricFamily {
	mf, ok := r.families[m]
	if !ok {
		t := dto.MetricType_GAUGE
		if m.Type == catalogue.Counter {
			t = dto.MetricType_COUNTER
		}
		mf = &dto.MetricFamily{Name: proto.String(m.Name), Help: proto.String(m.Help), Type: t.Enum()}
		r.families[m] = mf
	}
	return mf
}

func (r *renderer) add(m *catalogue.Metric, labels []*dto.LabelPair, v float64) {
	mf := r.family(m)
	metric := &dto.Metric{Label: labels}
	if m.Type == catalogue.Counter {
		metric.Counter = &dto.Counter{Value: proto.Float64(v)}
	} else {
		metric.Gauge = &dto.Gauge{Value: proto.Float64(v)}
	}
	mf.Metric = append(mf.Metric, metric)
}

func pair(name, value string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(name), Value: proto.String(value)}
}

// deviceLabels are the labels every series of one device carries.
func deviceLabels(hostname string, d *source.Device, alloc []source.Allocation) []*dto.LabelPair {
	l := make([]*dto.LabelPair, 0, 12)
	l = append(l,
		pair(catalogue.LabelGPU, strconv.Itoa(d.Index)),
		pair(catalogue.LabelUUID, d.UUID),
		pair(catalogue.LabelPCIBusID, d.PCIBusID),
		pair(catalogue.LabelDevice, "nvidia"+strconv.Itoa(d.Index)),
		pair(catalogue.LabelModelName, d.Model),
		pair(catalogue.LabelHostname, hostname),
	)
	if d.MIG != nil {
		l = append(l, pair(catalogue.LabelGIProfile, d.MIG.Profile), pair(catalogue.LabelGIID, strconv.Itoa(d.MIG.GIID)))
	}
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
		}{{catalogue.LabelPod, pods}, {catalogue.LabelNamespace, nss}, {catalogue.LabelContainer, ctrs}, {catalogue.LabelHPCJob, jobs}} {
			if len(kv.vals) > 0 {
				sort.Strings(kv.vals)
				l = append(l, pair(kv.name, strings.Join(kv.vals, ",")))
			}
		}
	}
	return l
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

func with(base []*dto.LabelPair, names []string, values ...string) []*dto.LabelPair {
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
		l = append(l, pair(n, v))
	}
	return l
}

func (r *renderer) render(snap *source.Snapshot) {
	allocs := map[string][]source.Allocation{}
	for _, a := range snap.Allocations {
		allocs[a.DeviceKey] = append(allocs[a.DeviceKey], a)
	}
	base := map[string][]*dto.LabelPair{}
	for i := range snap.Devices {
		d := &snap.Devices[i]
		key := d.Key()
		dcgmLabels := deviceLabels(snap.Hostname, d, allocs[key])
		labels := withoutLabel(dcgmLabels, catalogue.LabelModelName)
		base[key] = labels
		up := 0.0
		if d.Up {
			up = 1
		}
		r.add(catalogue.GPUUp, labels, up)
		for _, c := range d.Capabilities {
			r.add(catalogue.Capabilities, with(labels, catalogue.Capabilities.Labels, c), 1)
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
				r.add(s.Metric, with(l, s.Metric.Labels, s.LabelValues...), s.Value)
			}
		}
		for _, a := range allocs[key] {
			r.add(catalogue.AllocationInfo, with(labels, catalogue.AllocationInfo.Labels,
				a.JobID(), a.User, a.Team, a.Kind, a.Account, a.JobName, a.Scheduler), 1)
		}
	}
	for _, p := range snap.Processes {
		labels, ok := base[p.DeviceKey]
		if !ok {
			continue
		}
		pid := strconv.Itoa(p.PID)
		r.add(catalogue.ProcessMemory, with(labels, catalogue.ProcessMemory.Labels,
			pid, p.Command, p.User, p.Job, string(p.Type)), float64(p.MemoryBytes))
		if p.Orphan {
			r.add(catalogue.OrphanProcess, with(labels, catalogue.OrphanProcess.Labels, pid, p.Command, p.User, p.Job), 1)
		}
	}
	for _, j := range snap.JobCPU {
		r.add(catalogue.JobCPUSeconds, with(nil, catalogue.JobCPUSeconds.Labels, snap.Hostname, j.Job), j.Seconds)
	}
}
