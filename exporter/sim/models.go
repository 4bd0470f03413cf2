package sim

import "strings"

// Model holds the properties of one GPU model that shape its telemetry.
// The numbers follow the data sheets and what nvidia-smi shows on idle and
// busy machines, so dashboards and thresholds tuned on the simulator are
// not far off on real hardware.
type Model struct {
	Key         string  // name used in scenario files
	Name        string  // NVML device name, published as modelName
	MemoryMiB   float64 // total framebuffer
	ReservedMiB float64 // reserved by the driver
	IdlePowerW  float64
	// ContextPowerW is the draw of a board whose process holds a CUDA
	// context and runs nothing, where that is well above IdlePowerW (small
	// inference parts leave their deepest power state); 0: IdlePowerW.
	ContextPowerW float64
	MaxPowerW     float64 // typical draw at full load
	PowerLimitW   float64
	SMClockIdle   float64 // MHz
	SMClockMax    float64
	MemClock      float64
	TempIdle      float64 // °C at idle
	TempMax       float64 // °C at sustained full load (below throttling)
	TempThrottle  float64
	// MemTempIdle and MemTempMax are zero for GDDR boards whose memory
	// temperature NVML does not report: the metric is left out then.
	MemTempIdle float64
	MemTempMax  float64
	NVLinks     int      // links; 0 for PCIe-only boards
	BusIDs      []string // PCI bus ids of an 8-GPU board, by index
	PCIeGBps    float64  // host link bandwidth, for the PCIe rate profile
	NVLinkGBps  float64  // aggregate NVLink bandwidth
}

var dgxBusIDs = []string{
	"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
	"00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000000:BD:00.0",
}

var hgxBusIDs = []string{
	"00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
	"00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0",
}

var pcieBusIDs = []string{
	"00000000:01:00.0", "00000000:25:00.0", "00000000:41:00.0", "00000000:61:00.0",
	"00000000:81:00.0", "00000000:A1:00.0", "00000000:C1:00.0", "00000000:E1:00.0",
}

// models is the table of known GPU models, by scenario key.
var models = []*Model{
	{
		Key: "A100-SXM4-80GB", Name: "NVIDIA A100-SXM4-80GB",
		MemoryMiB: 81920, ReservedMiB: 552,
		IdlePowerW: 58, MaxPowerW: 385, PowerLimitW: 400,
		SMClockIdle: 210, SMClockMax: 1410, MemClock: 1593,
		TempIdle: 31, TempMax: 68, TempThrottle: 88, MemTempIdle: 34, MemTempMax: 76,
		NVLinks: 12, BusIDs: dgxBusIDs, PCIeGBps: 25, NVLinkGBps: 600,
	},
	{
		Key: "H100-SXM5-80GB", Name: "NVIDIA H100 80GB HBM3",
		MemoryMiB: 81559, ReservedMiB: 530,
		IdlePowerW: 72, MaxPowerW: 660, PowerLimitW: 700,
		SMClockIdle: 345, SMClockMax: 1980, MemClock: 2619,
		TempIdle: 29, TempMax: 71, TempThrottle: 89, MemTempIdle: 32, MemTempMax: 80,
		NVLinks: 18, BusIDs: hgxBusIDs, PCIeGBps: 50, NVLinkGBps: 900,
	},
	{
		Key: "H200", Name: "NVIDIA H200",
		MemoryMiB: 143771, ReservedMiB: 568,
		IdlePowerW: 76, MaxPowerW: 670, PowerLimitW: 700,
		SMClockIdle: 345, SMClockMax: 1980, MemClock: 3201,
		TempIdle: 30, TempMax: 72, TempThrottle: 89, MemTempIdle: 33, MemTempMax: 81,
		NVLinks: 18, BusIDs: hgxBusIDs, PCIeGBps: 50, NVLinkGBps: 900,
	},
	{
		Key: "L40S", Name: "NVIDIA L40S",
		MemoryMiB: 46068, ReservedMiB: 585,
		IdlePowerW: 36, MaxPowerW: 330, PowerLimitW: 350,
		SMClockIdle: 210, SMClockMax: 2520, MemClock: 9001,
		TempIdle: 30, TempMax: 74, TempThrottle: 87,
		NVLinks: 0, BusIDs: pcieBusIDs, PCIeGBps: 25,
	},
	{
		// NVIDIA L4 data sheet: 24 GB GDDR6, 72 W maximum power, 2040 MHz
		// boost; idle near 16 W in P8, and about 35 W (0.49 of TDP) while
		// a process holds a context doing nothing, as a fleet's L4s under
		// idle notebooks read (gpuwatch issue #56).
		Key: "L4", Name: "NVIDIA L4",
		MemoryMiB: 23034, ReservedMiB: 430,
		IdlePowerW: 16, ContextPowerW: 35, MaxPowerW: 70, PowerLimitW: 72,
		SMClockIdle: 210, SMClockMax: 2040, MemClock: 6251,
		TempIdle: 34, TempMax: 72, TempThrottle: 87,
		NVLinks: 0, BusIDs: pcieBusIDs, PCIeGBps: 25,
	},
}

// LookupModel finds a model by its scenario key or NVML name, ignoring case.
func LookupModel(name string) (*Model, bool) {
	for _, m := range models {
		if strings.EqualFold(m.Key, name) || strings.EqualFold(m.Name, name) {
			return m, true
		}
	}
	return nil, false
}

// ModelKeys lists the scenario keys of the known models.
func ModelKeys() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Key
	}
	return out
}

func (m *Model) busID(i int) string {
	if i < len(m.BusIDs) {
		return m.BusIDs[i]
	}
	// Boards with more than eight GPUs are rare; give them distinct, valid ids.
	return "00000000:" + hex2(0xE0+i) + ":00.0"
}

func hex2(v int) string {
	const digits = "0123456789ABCDEF"
	v &= 0xFF
	return string([]byte{digits[v>>4], digits[v&15]})
}
