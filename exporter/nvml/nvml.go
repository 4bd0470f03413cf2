package nvml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/exporter/source"
)

// ErrNoDriver is returned by Open when libnvidia-ml.so.1 cannot be loaded.
var ErrNoDriver = errors.New("NVIDIA driver library libnvidia-ml.so.1 not found")

// Options configure the NVML source.
type Options struct {
	Hostname string
	Logger   *slog.Logger
	Clock    source.Clock
	// DisableGPM turns GPM profiling off even where the device supports it.
	DisableGPM bool
	// DisableXID skips the XID event set (and its goroutine).
	DisableXID bool
	// EventWait is how long one wait on the XID event set blocks; it bounds
	// how long Close takes. Default 250ms.
	EventWait time.Duration
}

// Source reads GPUs through NVML.
type Source struct {
	lib     gonvml.Interface
	opts    Options
	log     *slog.Logger
	host    string
	mu      sync.Mutex // serialises Collect and Close
	devs    []*device
	gpm     *gpmState // nil when no device has GPM
	xid     *xidWatcher
	closed  bool
	reasons []clockReason
	// capsNVML and capsGPM are the Capabilities of a device without and
	// with GPM; shared, read-only, by every snapshot.
	capsNVML, capsGPM []string
	// capsNVMLUse and capsGPMUse add process_utilization, for a cycle that
	// read every process's own use.
	capsNVMLUse, capsGPMUse []string
	// lastProcs sizes the next snapshot's process slice.
	lastProcs int
}

// Open loads the driver's NVML library and initialises it.
func Open(opts Options) (*Source, error) { return New(gonvml.New(), opts) }

// New initialises a source over lib (a real library or a go-nvml mock).
//
// Init is the only call made before we know the library is loaded: any other
// NVML call after a failed Init resolves to a missing C symbol and kills the
// process, so a failed Init returns at once.
func New(lib gonvml.Interface, opts Options) (*Source, error) {
	if lib == nil {
		return nil, errors.New("nvml: no library")
	}
	if ret := lib.Init(); ret != gonvml.SUCCESS {
		if ret == gonvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("nvml init: %w", ErrNoDriver)
		}
		return nil, fmt.Errorf("nvml init: %s", ret.Error())
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = source.SystemClock{}
	}
	if opts.EventWait <= 0 {
		opts.EventWait = 250 * time.Millisecond
	}
	host := opts.Hostname
	if host == "" {
		h, err := os.Hostname()
		if err != nil {
			opts.Logger.Warn("cannot read hostname", "err", err)
		}
		host = h
	}
	s := &Source{lib: lib, opts: opts, log: opts.Logger, host: host, reasons: newClockReasons(),
		capsNVML: []string{capNVML}, capsGPM: []string{capNVML, capGPM},
		capsNVMLUse: []string{capNVML, capUse}, capsGPMUse: []string{capNVML, capGPM, capUse}}
	if err := s.enumerate(); err != nil {
		_ = lib.Shutdown()
		return nil, err
	}
	if !opts.DisableGPM {
		s.gpm = newGPMState(s)
	}
	if !opts.DisableXID {
		s.xid = startXIDWatcher(s)
	}
	return s, nil
}

// enumerate finds every GPU once: its handle, identity, MIG instances and
// NVLink links. Identity that fails here is retried by Collect.
func (s *Source) enumerate() error {
	n, ret := s.lib.DeviceGetCount()
	if ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml: count devices: %s", ret.Error())
	}
	s.devs = make([]*device, 0, n)
	for i := 0; i < n; i++ {
		d := &device{index: i}
		h, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != gonvml.SUCCESS {
			s.log.Warn("cannot get GPU handle; it is reported down", "gpu", i, "err", ret.Error())
		} else {
			d.h = h
			s.identify(d)
			if d.identified {
				s.enumerateLinks(d)
				s.enumerateMIG(d)
			}
		}
		s.devs = append(s.devs, d)
	}
	return nil
}

// identify reads the identity that labels every series of the device.
func (s *Source) identify(d *device) {
	uuid, ret := d.h.GetUUID()
	if ret != gonvml.SUCCESS {
		s.log.Warn("cannot read GPU UUID", "gpu", d.index, "err", ret.Error())
		return
	}
	name, ret := d.h.GetName()
	if ret != gonvml.SUCCESS {
		s.log.Warn("cannot read GPU name", "gpu", d.index, "err", ret.Error())
		name = ""
	}
	d.uuid, d.model = uuid, name
	d.busID = pciBusID(d.h, d.index)
	d.identified = true
	d.key = source.DeviceKey(uuid, nil)
	d.caps = s.capsNVML
}

// pciBusID returns the bus id as dcgm-exporter labels it (00000000:07:00.0).
// NVML fills BusId; when it is empty (some virtualised setups, the go-nvml
// mocks) it is rebuilt from domain, bus and device numbers.
func pciBusID(h gonvml.Device, index int) string {
	p, ret := h.GetPciInfo()
	if ret != gonvml.SUCCESS {
		return ""
	}
	if id := cString(p.BusId[:]); id != "" {
		return id
	}
	if id := cString(p.BusIdLegacy[:]); id != "" {
		return id
	}
	return fmt.Sprintf("%08x:%02x:%02x.0", p.Domain, p.Bus, p.Device)
}

func cString(b []int8) string {
	buf := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		buf = append(buf, byte(c))
	}
	return string(buf)
}

// Name is "nvml".
func (s *Source) Name() string { return "nvml" }

// Close stops the XID watcher, frees GPM samples and shuts NVML down. It is
// safe to call more than once.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.xid != nil {
		s.xid.stop()
	}
	if s.gpm != nil {
		s.gpm.free()
	}
	if ret := s.lib.Shutdown(); ret != gonvml.SUCCESS {
		return fmt.Errorf("nvml shutdown: %s", ret.Error())
	}
	return nil
}

// errClosed is returned by Collect after Close.
var errClosed = errors.New("nvml: source closed")

// Collect reads every device. A lost GPU or a failing field is reported
// inside the snapshot; an error means the source is closed or ctx ended.
func (s *Source) Collect(ctx context.Context) (*source.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	// The collector keeps the previous snapshot (scrapes and the landing
	// page may still read it), so its slices cannot be reused: a cycle
	// makes one exactly-sized slice per device instead, sized from the
	// last cycle, and nothing else on the success path.
	snap := &source.Snapshot{Time: s.opts.Clock.Now(), Hostname: s.host}
	n := 0
	for _, d := range s.devs {
		n += 1 + len(d.mig)
	}
	snap.Devices = make([]source.Device, 0, n)
	snap.Processes = make([]source.Process, 0, s.lastProcs)
	for _, d := range s.devs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("nvml collect interrupted at GPU %d: %w", d.index, err)
		}
		s.collectDevice(d, snap)
	}
	s.lastProcs = len(snap.Processes)
	return snap, nil
}
