package nvml

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/schema"
)

// xidWatcher waits on an NVML event set for XID errors in its own goroutine
// (a wait blocks in the driver) and keeps, per GPU, the last XID and a
// count per XID code since start.
type xidWatcher struct {
	s       *Source
	set     gonvml.EventSet
	handles []gonvml.Device // by GPU index; nil when not registered
	quit    chan struct{}
	done    chan struct{}

	mu    sync.Mutex
	state []xidState // by GPU index
}

type xidState struct {
	last   uint64
	counts []xidCount // sorted by xid
}

type xidCount struct {
	xid    uint64
	n      float64
	labels []string // the xid label value, made once per code
}

// startXIDWatcher registers every identified GPU for XID events and starts
// the wait loop. It returns nil when no GPU can deliver them.
func startXIDWatcher(s *Source) *xidWatcher {
	set, ret := s.lib.EventSetCreate()
	if ret != gonvml.SUCCESS {
		s.log.Warn("cannot create NVML event set; XID errors not published", "err", ret.Error())
		return nil
	}
	w := &xidWatcher{s: s, set: set, handles: make([]gonvml.Device, len(s.devs)),
		state: make([]xidState, len(s.devs)), quit: make(chan struct{}), done: make(chan struct{})}
	n := 0
	for _, d := range s.devs {
		if d.identified && w.register(d) {
			n++
		}
	}
	if n == 0 {
		_ = set.Free()
		return nil
	}
	go w.run()
	return w
}

// register asks for the XID events of a device; a GPU identified after
// start registers then.
func (w *xidWatcher) register(d *device) bool {
	ret := d.h.RegisterEvents(gonvml.EventTypeXidCriticalError, w.set)
	if ret != gonvml.SUCCESS {
		w.s.log.Info("XID events not available for this device; DCGM_FI_DEV_XID_ERRORS not published", "device", d.key, "nvml", ret.Error())
		return false
	}
	w.mu.Lock()
	w.handles[d.index] = d.h
	w.mu.Unlock()
	return true
}

func (w *xidWatcher) run() {
	defer close(w.done)
	waitMs := uint32(w.s.opts.EventWait / time.Millisecond)
	if waitMs == 0 {
		waitMs = 1
	}
	var lastErr gonvml.Return
	for {
		select {
		case <-w.quit:
			return
		default:
		}
		data, ret := w.set.Wait(waitMs)
		switch ret {
		case gonvml.SUCCESS:
			lastErr = gonvml.SUCCESS
			if data.EventType&gonvml.EventTypeXidCriticalError != 0 {
				w.record(data.Device, data.EventData)
			}
		case gonvml.ERROR_TIMEOUT:
			// No event within the wait.
		default:
			// Log a changed error once, and back off so a broken set (or a
			// lost GPU) does not spin.
			if ret != lastErr {
				w.s.log.Warn("waiting for XID events failed", "err", ret.Error())
				lastErr = ret
			}
			select {
			case <-w.quit:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func (w *xidWatcher) record(h gonvml.Device, xid uint64) {
	w.mu.Lock()
	i := slices.Index(w.handles, h)
	if i < 0 || h == nil {
		w.mu.Unlock()
		w.s.log.Warn("XID error on an unknown device", "xid", xid)
		return
	}
	st := &w.state[i]
	st.last = xid
	k := sort.Search(len(st.counts), func(j int) bool { return st.counts[j].xid >= xid })
	if k == len(st.counts) || st.counts[k].xid != xid {
		st.counts = slices.Insert(st.counts, k, xidCount{xid: xid, labels: []string{strconv.FormatUint(xid, 10)}})
	}
	st.counts[k].n++
	w.mu.Unlock()
	w.s.log.Warn("XID error", "gpu", i, "xid", xid)
}

// samples appends the last-XID gauge (0 before any) and the per-XID counters
// of a GPU registered for events.
func (w *xidWatcher) samples(index int, r *reader) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if index >= len(w.handles) || w.handles[index] == nil {
		return
	}
	st := &w.state[index]
	r.add(schema.XIDLast, float64(st.last))
	for _, c := range st.counts {
		r.addLabelled(schema.XIDErrors, c.labels, c.n)
	}
}

func (w *xidWatcher) stop() {
	close(w.quit)
	<-w.done
	_ = w.set.Free()
}
