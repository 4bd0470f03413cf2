package nvml

import (
	"log/slog"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuwatch/gpuwatch/exporter/source"
	"github.com/gpuwatch/gpuwatch/schema"
)

// field is one thing read from a device. A device remembers, one bit per
// field, what it does not support, so an unsupported call is made (and
// logged) once rather than every cycle.
type field uint8

const (
	fMemoryV2 field = iota
	fMemory
	fUtilization
	fEncoder
	fDecoder
	fTemperature
	fFieldValues
	fMemoryTemp
	fPowerUsage
	fPowerLimit
	fEnergy
	fSMClock
	fMemClock
	fClockEvents
	fClockEventsLegacy
	fPowerViolation
	fThermalViolation
	fECCSBEVol
	fECCDBEVol
	fECCSBEAgg
	fECCDBEAgg
	fRetiredSBE
	fRetiredDBE
	fRetiredPending
	fRemappedRows
	fPCIeReplay
	fNVLinkCRCFlit
	fNVLinkCRCData
	fNVLinkReplay
	fNVLinkRecovery
	fNVLinkBandwidth
	fComputeProcs
	fGraphicsProcs
	fGPM
	fProcessUtil
	numFields
)

// fieldNames are the short names used in FieldError.Field (and so in the
// field label of gpuwatch_exporter_collect_errors_total) and in logs.
var fieldNames = [numFields]string{
	fMemoryV2:          schema.FieldMemory,
	fMemory:            schema.FieldMemory,
	fUtilization:       schema.FieldUtilization,
	fEncoder:           schema.FieldEncoderUtilization,
	fDecoder:           schema.FieldDecoderUtilization,
	fTemperature:       schema.FieldTemperature,
	fFieldValues:       schema.FieldFieldValues,
	fMemoryTemp:        schema.FieldMemoryTemperature,
	fPowerUsage:        schema.FieldPowerUsage,
	fPowerLimit:        schema.FieldPowerLimit,
	fEnergy:            schema.FieldEnergy,
	fSMClock:           schema.FieldSMClock,
	fMemClock:          schema.FieldMemClock,
	fClockEvents:       schema.FieldClockEventReasons,
	fClockEventsLegacy: schema.FieldClockEventReasons,
	fPowerViolation:    schema.FieldPowerViolation,
	fThermalViolation:  schema.FieldThermalViolation,
	fECCSBEVol:         schema.FieldECCSBEVolatile,
	fECCDBEVol:         schema.FieldECCDBEVolatile,
	fECCSBEAgg:         schema.FieldECCSBEAggregate,
	fECCDBEAgg:         schema.FieldECCDBEAggregate,
	fRetiredSBE:        schema.FieldRetiredPagesSBE,
	fRetiredDBE:        schema.FieldRetiredPagesDBE,
	fRetiredPending:    schema.FieldRetiredPagesPending,
	fRemappedRows:      schema.FieldRemappedRows,
	fPCIeReplay:        schema.FieldPCIeReplay,
	fNVLinkCRCFlit:     schema.FieldNVLinkCRCFlit,
	fNVLinkCRCData:     schema.FieldNVLinkCRCData,
	fNVLinkReplay:      schema.FieldNVLinkReplay,
	fNVLinkRecovery:    schema.FieldNVLinkRecovery,
	fNVLinkBandwidth:   schema.FieldNVLinkBandwidth,
	fComputeProcs:      schema.FieldComputeProcesses,
	fGraphicsProcs:     schema.FieldGraphicsProcesses,
	fGPM:               schema.FieldGPM,
	fProcessUtil:       schema.FieldProcessUtilization,
}

func (f field) String() string { return fieldNames[f] }

// device is one physical GPU, found once at start.
type device struct {
	index      int
	h          gonvml.Device
	identified bool
	uuid       string
	model      string
	busID      string
	key        string

	unsupported uint64 // bit per field
	links       []int  // NVLink links in state enabled
	fv          []gonvml.FieldValue
	mig         []*migInstance
	gpm         *gpmSampler // nil without GPM
	caps        []string
	nsamples    int // samples published last cycle: sizes the next slice
	scratch     [maxReadValues]float64
	lastUseTS   uint64 // newest per-process utilization sample read (µs)
	useCount    []int  // per-process sample counts, reused every cycle
}

// migInstance is one MIG GPU instance of a device.
type migInstance struct {
	giid        int
	info        *source.MIG // shared, read-only, by every snapshot
	key         string
	h           gonvml.Device // MIG device handle, nil when not found
	unsupported uint64
	gpm         *gpmSampler
	caps        []string
	nsamples    int
}

// Capability names for gpuwatch_exporter_capabilities.
const (
	capNVML = "nvml"
	capGPM  = "gpm"
	capUse  = schema.CapabilityProcessUtilization
)

// reader reads the fields of one device for one cycle, sorting each NVML
// return into a value, an unsupported field (left out, remembered), a lost
// GPU (stop reading it) or a field error (reported, the rest continues).
type reader struct {
	log         *slog.Logger
	snap        *source.Snapshot
	key         string
	unsupported *uint64
	lost        bool
	samples     []source.Sample
}

func (r *reader) skip(f field) bool {
	return r.lost || *r.unsupported&(1<<f) != 0
}

// ok reports whether ret is SUCCESS and files it otherwise.
func (r *reader) ok(f field, ret gonvml.Return) bool {
	switch ret {
	case gonvml.SUCCESS:
		return true
	case gonvml.ERROR_NOT_SUPPORTED, gonvml.ERROR_FUNCTION_NOT_FOUND:
		// Remembered, so it is logged once per device and field and the
		// call is not repeated every cycle.
		*r.unsupported |= 1 << f
		r.log.Info("field not supported by this device; not published", "device", r.key, "field", f.String(), "nvml", ret.Error())
	case gonvml.ERROR_GPU_IS_LOST:
		r.lost = true
	default:
		r.fail(f, ret)
	}
	return false
}

func (r *reader) fail(f field, err error) {
	r.snap.Errors = append(r.snap.Errors, source.FieldError{DeviceKey: r.key, Field: f.String(), Err: err})
}

func (r *reader) add(m *schema.Metric, v float64) {
	r.samples = append(r.samples, source.Sample{Metric: m, Value: v})
}

func (r *reader) addLabelled(m *schema.Metric, labels []string, v float64) {
	r.samples = append(r.samples, source.Sample{Metric: m, LabelValues: labels, Value: v})
}
