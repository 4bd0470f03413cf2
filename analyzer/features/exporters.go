package features

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/gpuwatch/gpuwatch/schema"
)

// Exporter is a pod taken for a GPU exporter's own (the scrape target),
// never for a job. Prometheus attaches the target's pod, namespace and
// container to every series it scrapes: with honor_labels: false beside the
// exporter's exported_* holder labels, and on a GPU no one holds (where
// the exporter writes no holder) in their place whatever honor_labels
// says. Such a label names the monitoring pod, not the GPU's workload.
type Exporter struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Reason is the evidence, in words.
	Reason   string    `json:"reason"`
	LastSeen time.Time `json:"last_seen"`
}

// Exporters holds the pods taken as exporters, keyed by namespace/pod. A
// fetch adds what its data shows; the engine keeps them between cycles, so
// evidence seen once (an exporter beside an allocated GPU) still holds in a
// step that shows none.
type Exporters map[string]*Exporter

// List returns the exporters sorted by namespace and pod.
func (x Exporters) List() []Exporter {
	out := make([]Exporter, 0, len(x))
	for _, e := range x {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Pod < out[j].Pod
	})
	return out
}

// Prune drops exporters not seen since cutoff (replaced DaemonSet pods).
func (x Exporters) Prune(cutoff time.Time) {
	for k, e := range x {
		if e.LastSeen.Before(cutoff) {
			delete(x, k)
		}
	}
}

func podKey(ns, pod string) string { return ns + "/" + pod }

func (x Exporters) has(ns, pod string) bool { return x[podKey(ns, pod)] != nil }

func (x Exporters) add(ns, pod, reason string, seen time.Time) {
	k := podKey(ns, pod)
	if e := x[k]; e != nil {
		if seen.After(e.LastSeen) {
			e.LastSeen = seen
		}
		return
	}
	x[k] = &Exporter{Namespace: ns, Pod: pod, Reason: reason, LastSeen: seen}
}

// The reasons a pod is taken as an exporter.
const (
	ReasonTarget   = "scrape target: its pod label sits beside exported_pod on a GPU series (honor_labels: false), so it is the exporter's own"
	ReasonName     = "named as a GPU exporter's DaemonSet pod or container (dcgm-exporter under any release name, GPU Operator, gpuwatch)"
	reasonFamily   = "same DaemonSet as %s, already taken as the exporter"
	reasonMoves    = "its GPUs changed while it ran (on %s, %s was %s's for a while); a pod's GPUs are its own for its life, only the scrape target's label moves so"
	reasonEveryGPU = "holds every GPU of every node (%d nodes) under one DaemonSet's name: the scrape target's label, not an allocation"
)

// exporterPod matches the pod names of GPU exporters' DaemonSets, word by
// word so that a job called gpuwatcher-eval is no exporter:
// dcgm-exporter-…, nvidia-dcgm-exporter-… (GPU Operator),
// <release>-dcgm-exporter-… (NVIDIA's Helm chart), gpuwatch-exporter-…,
// <release>-gpuwatch-exporter-… and gpuwatch's agent.
var exporterPod = regexp.MustCompile(`(^|-)dcgm-exporter(-|$)|(^|-)gpuwatch(-[a-z0-9]+)?-(exporter|agent)(-|$)|^gpuwatch-[a-z0-9]{5}$`)

// exporterContainers are container names only an exporter uses. NVIDIA's
// Helm chart and gpuwatch's manifests call theirs "exporter", which is
// taken only together with a pod name that says exporter too.
var exporterContainers = map[string]bool{"dcgm-exporter": true, "nvidia-dcgm-exporter": true, "gpuwatch-exporter": true, "gpuwatch-agent": true}

// NamedExporter reports whether a pod or container is named as a GPU
// exporter's own.
func NamedExporter(pod, container string) bool {
	if exporterPod.MatchString(pod) || exporterContainers[container] {
		return true
	}
	return container == "exporter" && strings.Contains(pod, "exporter")
}

// daemonSetSuffix is the random tail Kubernetes puts on a DaemonSet's (or
// a Job's) pods: five characters of its generator's alphabet.
var daemonSetSuffix = regexp.MustCompile(`-[bcdfghjklmnpqrstvwxz2456789]{5}$`)

// family is a pod's controller: its namespace and name without the random
// tail, "" for a pod whose name has none.
func family(ns, pod string) string {
	loc := daemonSetSuffix.FindStringIndex(pod)
	if loc == nil {
		return ""
	}
	return ns + "/" + pod[:loc[0]]
}

// plainPod is the scrape target's pod on a series that carries no
// exported_pod: the pod label is either the workload's (dcgm-exporter wrote
// it, honor_labels: true) or the target's.
func plainPod(m model.Metric) (ns, pod string, ok bool) {
	if lv(m, ExportedPrefix+schema.LabelPod) != "" {
		return "", "", false
	}
	pod = lv(m, schema.LabelPod)
	return lv(m, schema.LabelNamespace), pod, pod != ""
}

// classify reads the evidence of one fetch (every series of every feature;
// count holds the framebuffer sample counts per step) and adds the pods it
// shows to be exporters to x. stepEnds are the fetch's step ends.
func (x Exporters) classify(results []model.Matrix, count model.Matrix, stepEnds []time.Time) {
	last := stepEnds[len(stepEnds)-1]
	x.fromLabels(results, last)
	if !x.keepKnown(count, last) {
		return
	}
	hs := readHoldings(count, stepEnds)
	keys := make([]string, 0, len(hs.pods))
	for k := range hs.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	x.movers(hs, keys, len(stepEnds), last)
	x.everyGPU(hs, keys, last)
	x.families(keys, last)
}

// fromLabels adds the pods the label evidence shows: beside exported_pod,
// or named so.
func (x Exporters) fromLabels(results []model.Matrix, last time.Time) {
	for _, m := range results {
		for _, ss := range m {
			if lv(ss.Metric, schema.LabelUUID) == "" {
				continue
			}
			pod, ns := lv(ss.Metric, schema.LabelPod), lv(ss.Metric, schema.LabelNamespace)
			if pod == "" {
				continue
			}
			if lv(ss.Metric, ExportedPrefix+schema.LabelPod) != "" {
				x.add(ns, pod, ReasonTarget, last)
				continue
			}
			if NamedExporter(pod, lv(ss.Metric, schema.LabelContainer)) {
				x.add(ns, pod, ReasonName, last)
			}
		}
	}
}

// keepKnown marks known exporters seen again (they are kept while they
// serve) and reports whether a plain pod is not yet told apart: holding
// evidence is needed only for those.
func (x Exporters) keepKnown(count model.Matrix, last time.Time) (unknown bool) {
	for _, ss := range count {
		if ns, pod, ok := plainPod(ss.Metric); ok && lv(ss.Metric, schema.LabelUUID) != "" {
			if x.has(ns, pod) {
				x.add(ns, pod, "", last)
			} else {
				unknown = true
			}
		}
	}
	return unknown
}

// holding is the devices a plain pod held, with the steps it held each.
type holding struct {
	host string
	devs map[string][]int // device -> steps held
}

// holdings is the holding evidence of one fetch, from the sample counts:
// who held which device in which step.
type holdings struct {
	pods     map[string]*holding         // ns/pod -> holding (plain pods only)
	holders  map[string]map[int][]string // host|device -> step -> holder keys
	hostDevs map[string]map[string]bool  // host -> its devices seen
}

// readHoldings reads the holding evidence from the sample counts.
func readHoldings(count model.Matrix, stepEnds []time.Time) holdings {
	index := stepIndex(stepEnds)
	hs := holdings{pods: map[string]*holding{}, holders: map[string]map[int][]string{}, hostDevs: map[string]map[string]bool{}}
	for _, ss := range count {
		id, ok := identifyRaw(ss.Metric)
		if !ok {
			continue
		}
		d := DeviceID(id.Host, id.Device)
		if hs.hostDevs[id.Host] == nil {
			hs.hostDevs[id.Host] = map[string]bool{}
		}
		hs.hostDevs[id.Host][id.Device] = true
		ns, pod, plain := plainPod(ss.Metric)
		holder := id.Job
		if plain {
			holder = "pod:" + podKey(ns, pod)
		}
		for _, p := range ss.Values {
			i := index(p.Timestamp.Time())
			if i < 0 || p.Value <= 0 {
				continue
			}
			if holder != "" {
				if hs.holders[d] == nil {
					hs.holders[d] = map[int][]string{}
				}
				hs.holders[d][i] = append(hs.holders[d][i], holder)
			}
			if !plain {
				continue
			}
			h := hs.pods[podKey(ns, pod)]
			if h == nil {
				h = &holding{host: id.Host, devs: map[string][]int{}}
				hs.pods[podKey(ns, pod)] = h
			}
			h.devs[id.Device] = append(h.devs[id.Device], i)
		}
	}
	return hs
}

// stepIndex returns the index of a step end among stepEnds, -1 for a time
// that is none of them.
func stepIndex(stepEnds []time.Time) func(time.Time) int {
	var step time.Duration
	if len(stepEnds) > 1 {
		step = stepEnds[1].Sub(stepEnds[0])
	}
	return func(t time.Time) int {
		i := 0
		if step > 0 {
			i = int(t.Sub(stepEnds[0]) / step)
		}
		if i < 0 || i >= len(stepEnds) || !stepEnds[i].Equal(t) {
			return -1
		}
		return i
	}
}

// splitPodKey is podKey's inverse.
func splitPodKey(k string) (string, string) { ns, pod, _ := strings.Cut(k, "/"); return ns, pod }

// movers adds the pods whose GPUs changed while they ran: another holder
// had one of its devices, alone, at a step of the pod's life. A workload's
// GPUs are its own from its start to its end (pods sharing a GPU share it
// all along); only the target's label, filling whatever GPU is free, moves
// so. steps is the fetch's number of steps.
func (x Exporters) movers(hs holdings, keys []string, steps int, last time.Time) {
	for _, k := range keys {
		h := hs.pods[k]
		ns, pod := splitPodKey(k)
		if x.has(ns, pod) {
			continue
		}
		life := map[int]bool{}
		for _, held := range h.devs {
			for _, i := range held {
				life[i] = true
			}
		}
		lo, hi := steps, -1
		for i := range life {
			lo, hi = min(lo, i), max(hi, i)
		}
		devs := make([]string, 0, len(h.devs))
		for dev := range h.devs {
			devs = append(devs, dev)
		}
		sort.Strings(devs)
		for _, dev := range devs {
			if found := handover(k, h.devs[dev], hs.holders[DeviceID(h.host, dev)], life, lo, hi); found != "" {
				x.add(ns, pod, fmt.Sprintf(reasonMoves, h.host, dev, found), last)
				break
			}
		}
	}
}

// handover is the first holder other than pod k that had one of the pod's
// devices (by: step -> holders) at a step inside the pod's life (lo, hi)
// at which the pod did not hold it (held: the steps it did); "" if none.
// Inside its life only: its first and last steps are partial, and a
// handover there is the previous or next holder's.
func handover(k string, held []int, by map[int][]string, life map[int]bool, lo, hi int) string {
	mine := map[int]bool{}
	for _, i := range held {
		mine[i] = true
	}
	for j := lo + 1; j < hi; j++ {
		if !life[j] || mine[j] {
			continue
		}
		for _, o := range by[j] {
			if o != "pod:"+k {
				return strings.TrimPrefix(o, "pod:")
			}
		}
	}
	return ""
}

// everyGPU adds the pods of one DaemonSet holding every GPU of every node.
func (x Exporters) everyGPU(hs holdings, keys []string, last time.Time) {
	fams := map[string][]string{}
	for _, k := range keys {
		ns, pod := splitPodKey(k)
		if f := family(ns, pod); f != "" {
			fams[f] = append(fams[f], k)
		}
	}
	for _, members := range fams {
		hosts := map[string]bool{}
		all := true
		for _, k := range members {
			h := hs.pods[k]
			hosts[h.host] = true
			for dev := range hs.hostDevs[h.host] {
				if _, ok := h.devs[dev]; !ok {
					all = false
				}
			}
		}
		if !all || len(hosts) < 2 || len(hosts) != len(hs.hostDevs) {
			continue
		}
		for _, k := range members {
			ns, pod := splitPodKey(k)
			x.add(ns, pod, fmt.Sprintf(reasonEveryGPU, len(hosts)), last)
		}
	}
}

// families adds another pod of an exporter's DaemonSet (a replaced pod, or
// the same DaemonSet on another node): it is the exporter too.
func (x Exporters) families(keys []string, last time.Time) {
	known := map[string]string{}
	for _, e := range x.List() {
		if f := family(e.Namespace, e.Pod); f != "" && known[f] == "" {
			known[f] = e.Pod
		}
	}
	for _, k := range keys {
		ns, pod := splitPodKey(k)
		if x.has(ns, pod) {
			continue
		}
		if by := known[family(ns, pod)]; by != "" && family(ns, pod) != "" {
			x.add(ns, pod, fmt.Sprintf(reasonFamily, by), last)
		}
	}
}
